"""Launchers: how a kernel reference becomes something that runs a Problem."""

from __future__ import annotations

from kcontract.contract.model import KernelRef
from kcontract.errors import EnvironmentProblem
from kcontract.launch.base import Launcher


def launcher_for(kernel: KernelRef, family) -> Launcher:
    """The launcher for a kernel reference."""
    if kernel.python is not None:
        from kcontract.launch.python import PythonLauncher

        return PythonLauncher(kernel.python)
    cuda_ready([kernel.cuda.source])
    raise EnvironmentProblem(f"CUDA kernel {kernel.cuda.source}: no CUDA launcher in this version")


def cuda_ready(names: list[str]) -> None:
    """Raise EnvironmentProblem (exit 3) unless CuPy sees a GPU."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return
    except Exception:  # no CuPy, no driver, or no device: all mean "no GPU here"
        pass
    raise EnvironmentProblem(f"{', '.join(names[:4])} need a CUDA GPU and CuPy (pip install -e '.[cuda13]'); "
                             f"none is usable here. Run `kcontract check` for everything that needs no GPU, "
                             f"or `kcontract run --only` entries with python kernels")
