"""A CudaLauncher without a GPU: one `rmsnorm` role whose launches are recorded, not run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BufferPtr:
    """A CuPy buffer's `.data`: its device address."""

    ptr: int


@dataclass(frozen=True)
class BufferAt:
    """A device buffer as a launch argument: only its address."""

    address: int

    @property
    def data(self) -> BufferPtr:
        return BufferPtr(self.address)


def stub_launcher(divisors: dict | None = None):
    """A launcher of Triton's ABI whose `rmsnorm` function records (args, shared_mem), and the list it records to."""
    from kcontract.launch.cuda import CudaLauncher, trailing_args
    from kcontract.problem import LaunchShape

    calls = []
    launcher = object.__new__(CudaLauncher)
    launcher.maps, launcher.smem, launcher.trailing = {}, {"rmsnorm": 16}, trailing_args("triton")
    launcher.label, launcher.divisors = "kernels/rms_norm_triton.py", divisors or {}
    launcher.shapes = {"rmsnorm": LaunchShape("rmsnorm", 128)}
    launcher.functions = {"rmsnorm": lambda grid, block, args, shared_mem, stream: calls.append((args, shared_mem))}
    return launcher, calls
