"""Where a gate's time and memory go: its stages, peak host and GPU memory, and reference-cache use."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

STAGES = ("inputs", "reference", "launch", "compare")
SPLIT = (*STAGES, "other")  # what a gate's seconds split into: the stages and the time outside them
MB = 1 << 20


@dataclass
class Clock:
    """Seconds per stage (nested stages count once, in the innermost), peaks and cache outcomes of one gate."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    gpu_peak: int = 0  # bytes the launcher's memory pool held at most
    gpu_live: int = 0  # bytes the gate's device arrays held at most at once (tracking_gpu_live), cached blocks aside
    cache: dict[str, dict[str, int]] = field(default_factory=lambda: {
        what: {"hit": 0, "miss": 0, "rebuilt": 0, "off": 0} for what in ("references", "inputs")})

    def summary(self, total: float, host_peak: int) -> dict:
        """Plain numbers for the JSON, the receipt and `--profile`."""
        staged = {f"{name}_s": round(s, 3) for name, s in self.seconds.items()}
        other = max(0.0, total - sum(self.seconds.values()))
        return {**staged, "other_s": round(other, 3), "peak_host_mb": round(host_peak / MB, 1),
                "peak_gpu_mb": round(self.gpu_peak / MB, 1), "live_gpu_mb": round(self.gpu_live / MB, 1),
                **{what: dict(n) for what, n in self.cache.items()}}


_clock: Clock | None = None
_children: list[list[float]] = []  # per open stage: seconds spent in stages nested inside it


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Count the enclosed time to `name` in the current gate's clock (nothing when no gate is measured)."""
    if _clock is None:
        yield
        return
    start = time.perf_counter()
    _children.append([0.0])
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        inner = _children.pop()[0]
        _clock.seconds[name] += elapsed - inner
        if _children:
            _children[-1][0] += elapsed


def timed(make: Callable[[], Iterable], name: str) -> Iterator:
    """Yield from the iterable `make()` returns, counting the time it and each item take to make to `name`."""
    with stage(name):
        it = iter(make())
    while True:
        with stage(name):
            try:
                item = next(it)
            except StopIteration:
                return
        yield item


def note_gpu_bytes(held: int) -> None:
    """The launcher's memory pool holds `held` bytes now."""
    if _clock is not None:
        _clock.gpu_peak = max(_clock.gpu_peak, int(held))


def note_gpu_live(live: int) -> None:
    """The device arrays hold `live` bytes now."""
    if _clock is not None:
        _clock.gpu_live = max(_clock.gpu_live, int(live))


@contextmanager
def tracking_gpu_live() -> Iterator[None]:
    """While inside, each block CuPy's pool hands out or takes back in this thread moves the live bytes the gate's
    clock peaks at (CuPy's memory hooks); nothing where CuPy is not installed."""
    try:
        from cupy.cuda.memory_hook import MemoryHook
    except Exception:  # no CuPy: no device arrays to count
        yield
        return

    class LiveBytes(MemoryHook):
        """Bytes of the pool's blocks handed out inside and not yet taken back, by pointer: a block an earlier
        task left alive is not this one's."""

        name = "kcontract-live-bytes"

        def __init__(self) -> None:
            self.live, self.blocks = 0, {}

        def malloc_postprocess(self, **kwargs) -> None:
            if kwargs.get("mem_ptr"):
                self.blocks[kwargs["mem_ptr"]] = kwargs["mem_size"]
                self.live += kwargs["mem_size"]
                note_gpu_live(self.live)

        def free_postprocess(self, **kwargs) -> None:
            self.live -= self.blocks.pop(kwargs.get("mem_ptr"), 0)

    with LiveBytes():
        yield


def note_cache(outcome: str, what: str = "references") -> None:
    """A reference (or drawn inputs) came from the cache ('hit'), was made ('miss'), replaced a corrupt copy
    ('rebuilt'), or caching is off ('off')."""
    if _clock is not None:
        _clock.cache[what][outcome] += 1


def reset_host_peak() -> None:
    """Restart the process's peak resident memory where Linux allows it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def host_peak_bytes() -> int:
    """Peak resident memory of this process since the last reset (VmHWM), else since it started."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def measuring() -> Iterator[Clock]:
    """Measure one gate: its stages, cache use and GPU peak go to the yielded clock."""
    global _clock
    outer = _clock
    _clock = Clock()
    reset_host_peak()
    try:
        yield _clock
    finally:
        _clock = outer
