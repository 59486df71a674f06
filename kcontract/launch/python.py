"""The `python` launcher: any kernel reachable from Python, called with the family's ABI buffers."""

from __future__ import annotations

import importlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from kcontract.errors import UsageError
from kcontract.numerics import poison_bits
from kcontract.problem import OutputSpec, Problem


def resolve(target: str) -> Callable:
    """Import `module:function`, with a clear error when either is missing."""
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"kernel {target}: cannot import {module_name} ({exc}); run from the repository root "
                         f"or put it on PYTHONPATH") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UsageError(f"kernel {target}: {module_name} has no {attr}") from None


def poisoned(spec: OutputSpec) -> np.ndarray:
    """An output buffer full of NaN in its format, so unwritten elements fail."""
    fmt = spec.fmt.removeprefix("workspace-")
    if fmt in ("bf16", "fp16"):
        return np.full(spec.shape, poison_bits(fmt), dtype=np.uint16)
    return np.full(spec.shape, np.nan, dtype=np.float32)


class PythonLauncher:
    """Calls fn(**inputs, **outputs, **scalars); the function writes the outputs in place."""

    def __init__(self, target: str):
        self.target = target
        self.fn = resolve(target)

    def run(self, problem: Problem) -> dict[str, np.ndarray]:
        inputs = {}
        for name, array in problem.inputs.items():
            view = array.view()
            view.flags.writeable = False  # a kernel that writes its inputs fails loudly
            inputs[name] = view
        outputs = {name: poisoned(spec) for name, spec in problem.outputs.items()}
        self.fn(**inputs, **outputs, **problem.scalars)
        return outputs

    def run_concurrent(self, problems: list[Problem]) -> list[dict[str, np.ndarray]]:
        with ThreadPoolExecutor(max_workers=len(problems)) as pool:
            return list(pool.map(self.run, problems))
