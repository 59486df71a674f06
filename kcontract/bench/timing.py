"""GPU timing: CUDA events around single calls with L2 flushed between, and CUDA-graph replays."""

from __future__ import annotations

from typing import Callable

import numpy as np

from kcontract.bench.ceiling import read_launch

FLUSH_BYTES = 512 << 20  # read between timed calls: several times any L2, so inputs come from DRAM


class Timer:
    """Times launches on one stream."""

    def __init__(self, cupy):
        self.cp = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.flush_buf = cupy.full(FLUSH_BYTES // 4, 0x01020304, dtype=cupy.uint32)
        self.flush_read = read_launch(cupy, self.flush_buf, cupy.zeros(1, dtype=cupy.uint32))
        cupy.cuda.Device().synchronize()  # the buffer is filled on the default stream, before any timed call

    def flush(self) -> None:
        """Evict the L2 by reading a buffer far larger than it: clean lines, so a timed call writes nothing back."""
        self.flush_read(self.stream)

    def events(self, launch: Callable[[object], None], repeat: int, warmup: int = 3) -> float:
        """Median microseconds of `repeat` single calls, each after an L2 flush, timed by CUDA events."""
        cp = self.cp
        for _ in range(warmup):
            launch(self.stream)
        times = []
        start, end = cp.cuda.Event(), cp.cuda.Event()
        for _ in range(repeat):
            self.flush()
            start.record(self.stream)
            launch(self.stream)
            end.record(self.stream)
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1000.0)
        return float(np.median(times))

    def graph(self, launches: list[Callable[[object], None]], replays: int = 5) -> float:
        """Microseconds per call of a CUDA graph holding `launches` back to back (each over its own buffers)."""
        cp = self.cp
        for launch in launches:
            launch(self.stream)
        self.stream.synchronize()
        self.stream.begin_capture()
        for launch in launches:
            launch(self.stream)
        graph = self.stream.end_capture()
        graph.upload(self.stream)
        graph.launch(self.stream)
        self.stream.synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(replays):
            self.flush()
            start.record(self.stream)
            graph.launch(self.stream)
            end.record(self.stream)
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1000.0 / len(launches))
        return float(np.median(times))
