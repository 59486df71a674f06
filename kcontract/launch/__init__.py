"""Launchers: how a kernel reference becomes something that runs a Problem."""

from __future__ import annotations

import functools

from kcontract.contract.model import KernelRef
from kcontract.errors import EnvironmentProblem
from kcontract.launch.base import Launcher


def launcher_for(kernel: KernelRef, loaded=None, entry=None) -> Launcher:
    """The launcher for a kernel reference (CUDA kernels need the contract and entry for their cubins)."""
    if kernel.python is not None and not kernel.device:
        from kcontract.launch.python import PythonLauncher

        return PythonLauncher(kernel.python)
    cuda_ready([kernel.label])
    from kcontract.launch.cuda import CudaLauncher, DeviceLauncher

    return DeviceLauncher(kernel.python) if kernel.python is not None else CudaLauncher(loaded, entry, kernel)


@functools.cache
def gpu_present() -> bool:
    """Whether CuPy sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, or no device: all mean "no GPU here"
        return False


def cuda_ready(names: list[str]) -> None:
    """Raise EnvironmentProblem (exit 3) unless CuPy sees a GPU."""
    if gpu_present():
        return
    raise EnvironmentProblem(f"{', '.join(names[:4])} need a CUDA GPU and CuPy (pip install -e '.[cuda13]' or "
                             f"'.[cuda12]'); none is usable here. Run `kcontract check` for everything that needs "
                             f"no GPU, `kcontract run --gate 5` for launch records, or `kcontract run --only` "
                             f"entries with python kernels")
