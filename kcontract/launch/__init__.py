"""Launchers: how a kernel reference becomes something that runs a Problem."""

from __future__ import annotations

import functools

from kcontract.contract.model import KernelRef
from kcontract.errors import EnvironmentProblem
from kcontract.launch.base import Launcher


def launcher_for(kernel: KernelRef, loaded=None, entry=None, build=None, interpret: bool = False) -> Launcher:
    """The launcher for a kernel reference (a CUDA kernel needs the contract, its entry and its build, the
    kcontract.builds.artifact.KernelBuild its job carries; `interpret`: a Triton kernel runs through Triton's
    interpreter on the CPU)."""
    if interpret and kernel.triton is not None:
        from kcontract.launch.interpret import InterpretLauncher

        return InterpretLauncher(loaded, kernel)
    if kernel.python is not None and not kernel.device:
        from kcontract.launch.python import PythonLauncher

        return PythonLauncher(kernel.python)
    cuda_ready([kernel.label])
    from kcontract.launch.cuda import CudaLauncher, DeviceLauncher

    return DeviceLauncher(kernel.python) if kernel.python is not None else CudaLauncher(loaded, entry, kernel, build)


@functools.cache
def gpu_problem() -> str | None:
    """None when CuPy runs on a CUDA device here, else why not, in one phrase."""
    try:
        import cupy
    except ImportError as error:
        missing = getattr(error, "name", None) == "cupy"
        return ("CuPy is not installed: pip install 'kcontract[cu13]' (or '[cu12]' for CUDA 12)" if missing
                else f"CuPy does not import ({error}): reinstall the CuPy wheel of this machine's CUDA")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # no driver, an old driver, or no device: CuPy says which
        return f"CuPy sees no usable CUDA device ({error})"
    if count < 1:
        return "CuPy sees no CUDA device"
    try:
        cupy.full((1,), 1.0, dtype=cupy.float32).get()  # CuPy's own kernels compile and run (its NVRTC, the driver)
    except Exception as error:
        return f"CuPy cannot run a kernel on device 0 ({type(error).__name__}: {error})"
    return None


def gpu_present() -> bool:
    """Whether CuPy runs on a CUDA device here."""
    return gpu_problem() is None


def cuda_ready(names: list[str]) -> None:
    """Raise EnvironmentProblem (exit 3) unless CuPy runs on a GPU."""
    why = gpu_problem()
    if why is None:
        return
    raise EnvironmentProblem(f"{', '.join(names[:4])} need a CUDA GPU and CuPy; {why}. Run `kcontract check` for "
                             f"everything that needs no GPU, `kcontract run --gate 5` for launch records, or "
                             f"`kcontract run --only` entries with python kernels")
