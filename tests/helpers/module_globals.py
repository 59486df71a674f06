"""A stand-in for the few CuPy calls that reach a loaded module's `__device__` variables by name."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


class DriverError(Exception):
    """As cupy.cuda.driver.CUDADriverError."""


class RuntimeError_(Exception):
    """As cupy.cuda.runtime.CUDARuntimeError."""


class Module:
    """A loaded module's `__device__` variables: name -> value; a name it lacks raises as the driver does."""

    def __init__(self, variables: dict[str, int]):
        self.variables = dict(variables)

    def get_global(self, name: str) -> str:
        if name not in self.variables:
            raise DriverError(f"CUDA_ERROR_NOT_FOUND: {name}")
        return name


class _Array:
    def __init__(self, module: Module, name: str):
        self.module, self.name = module, name

    def get(self) -> np.ndarray:
        return np.array([self.module.variables[self.name]], np.uint32)

    def fill(self, value: int) -> None:
        self.module.variables[self.name] = value


def fake_cupy(module: Module) -> SimpleNamespace:
    """A `cupy` whose arrays over module globals read and write `module`."""
    return SimpleNamespace(
        uint32=np.uint32,
        ndarray=lambda shape, dtype, memptr: _Array(module, memptr),
        cuda=SimpleNamespace(driver=SimpleNamespace(CUDADriverError=DriverError),
                             runtime=SimpleNamespace(CUDARuntimeError=RuntimeError_),
                             Device=lambda: SimpleNamespace(synchronize=lambda: None)))
