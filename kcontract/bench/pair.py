"""Both builds of a call on one GPU: the base revision's kernel and the head's, each loaded from its own build,
and the base's loaded a second time (the placebo), their calls made by each side's family at the same sizes and
paired by label and size, every side on one set of buffers where their calls agree on them (else each its own,
drawn with the same seed); a slot times one side as `bench` times a call (CUDA events, L2 flushed between, the
median of `repeat`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from kcontract.bench.call import materialise, same_buffers
from kcontract.bench.timing import Timer
from kcontract.errors import KContractError
from kcontract.review.abba import BASE, HEAD, PLACEBO
from kcontract.review.timing import TimedCall

SEED = 0  # the inputs' seed, the same for both sides


@dataclass
class _Side:
    """One revision's entry loaded on the GPU: its launcher, and its calls by (label, size)."""

    launcher: object
    calls: dict[tuple[str, str], object]


def _side(loaded, entry, builds, sm: str) -> _Side:
    """An entry's kernel loaded from its build for `sm`, and its family's bench calls at its default sizes."""
    from kcontract.launch.cuda import CudaLauncher

    kernel = entry.kernel.compiled
    launcher = CudaLauncher(loaded, entry, entry.kernel, builds.kernel(kernel, [sm]))
    entry.family.exports = builds.family_exports(kernel, entry.family)
    calls = {}
    for call in entry.family.bench_calls(dict(type(entry.family).bench_sizes)):
        calls.setdefault((call.label, call.size_text), call)
    return _Side(launcher, calls)


class PairClock:
    """Times each call of an entry on the head's build and, where the base has the entry and makes the same call,
    on the base's; `notes` says why an entry's base could not be loaded."""

    def __init__(self, head, head_builds, base, base_builds, repeat: int):
        """`head`, `base`: the loaded contracts (`base` None where the base's does not load) and their Builds."""
        import cupy

        from kcontract.launch.cuda import device_sm, target_for

        self.cp, self.timer, self.repeat = cupy, Timer(cupy), repeat
        self.head, self.head_builds, self.base, self.base_builds = head, head_builds, base, base_builds
        self.sm = target_for(device_sm(cupy), list(head.targets))
        self.notes: list[str] = []

    def _base_side(self, name: str) -> _Side | None:
        """The base's entry of this name loaded, or None (no such CUDA entry, or it does not load: noted)."""
        entry = next((e for e in self.base.entries if e.name == name), None) if self.base is not None else None
        if entry is None or entry.kernel.compiled is None:
            return None
        try:
            return _side(self.base, entry, self.base_builds, self.sm)
        except KContractError as error:
            self.notes.append(f"{name}: the base's kernel does not load ({error.message}); timed on the head only")
            return None

    def calls(self, entry: str) -> Iterator[TimedCall]:
        """The head entry's calls, each with its inputs made for every side while it is timed."""
        head = _side(self.head, self.head.entry(entry), self.head_builds, self.sm)
        base = self._base_side(entry)
        placebo = self._base_side(entry) if base is not None else None
        try:
            for key, call in head.calls.items():
                others = {}
                if base is not None and placebo is not None and key in base.calls:
                    others = {BASE: (base.launcher, base.calls[key]), PLACEBO: (placebo.launcher, placebo.calls[key])}
                yield from self._timed({HEAD: (head.launcher, call), **others}, call)
        finally:
            for side in (head, base, placebo):
                if side is not None:
                    side.launcher.close()

    def _timed(self, runs: dict[str, tuple], call) -> Iterator[TimedCall]:
        """One call with its buffers on the device for the time it is timed."""
        with self.timer.stream:
            values = {HEAD: materialise(self.cp, call, SEED)}
            for side, (_, made) in runs.items():
                if side != HEAD:
                    values[side] = values[HEAD] if same_buffers(call, made) else materialise(self.cp, made, SEED)
        self.timer.stream.synchronize()

        def slot(side: str) -> float:
            launcher, made = runs[side]
            return self.timer.events(lambda s: launcher.launch_steps(made.launches, values[side], s, made.label),
                                     self.repeat)

        yield TimedCall(call.label, call.size_text, slot, BASE in runs)
        del values
        self.cp.get_default_memory_pool().free_all_blocks()
