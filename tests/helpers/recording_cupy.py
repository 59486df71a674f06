"""A CuPy stand-in passed to the bench's timer: host arrays for device buffers, and every kernel launch and buffer
write recorded in order, so a test reads what ran between timed calls."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


class RecordingCupy:
    """`full`, `zeros`, `RawKernel`, `uint64`, `cuda.Device` and `cuda.Stream`, each use noted in `events`."""

    uint32, uint64 = np.uint32, np.uint64

    def __init__(self, sms: int = 4):
        self.events: list[tuple] = []
        device = SimpleNamespace(attributes={"MultiProcessorCount": sms}, synchronize=lambda: None)
        self.cuda = SimpleNamespace(Device=lambda: device, Stream=lambda non_blocking=False: SimpleNamespace())

    def full(self, count: int, value: int, dtype):
        self.events.append(("fill", count * np.dtype(dtype).itemsize))
        return _Buffer(count, dtype)

    def zeros(self, count: int, dtype):
        return _Buffer(count, dtype)

    def RawKernel(self, source: str, name: str):  # noqa: N802 (CuPy's name)
        def launch(grid, block, args, stream=None):
            self.events.append(("launch", name, grid, block, args, stream))
        return launch


class _Buffer:
    """A device buffer's size, without its bytes."""

    def __init__(self, count: int, dtype):
        self.nbytes = count * np.dtype(dtype).itemsize
