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
    raise EnvironmentProblem(f"CUDA kernel {kernel.cuda.source}: the CUDA launcher is not built yet; "
                             f"run this entry with a python kernel or wait for the CUDA launcher")
