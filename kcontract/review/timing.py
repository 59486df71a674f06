"""The timing loop of a review: every timed entry's calls, each through the ABBA schedule where the base makes the
same call, else on the head alone, judged as they come. A clock gives each call's slots: the GPU's times CUDA
events (bench/pair.py); a test's is any object with the same method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from kcontract.review.abba import Slot, abba, head_only
from kcontract.review.changes import Changes
from kcontract.review.speed import CallSpeed, Settings, judged, new_call


@dataclass
class TimedCall:
    """One bench call of an entry, ready to time: its label and size, and the slot that times either side."""

    label: str
    size: str
    slot: Slot
    paired: bool  # the base makes the same call (same label and size), so the slot times BASE too


class Clock(Protocol):
    """What times calls: each of an entry's bench calls in turn (its buffers live while it is timed)."""

    def calls(self, entry: str) -> Iterator[TimedCall]:
        """The entry's calls, each ready to time."""


def time_entries(changes: Changes, clock: Clock, settings: Settings,
                 progress: Callable[[str], None] = lambda line: None) -> list[CallSpeed]:
    """Every call of the changed entries, then of their current callers, timed and judged in turn."""
    found = []
    for entry in changes.timed:
        for call in clock.calls(entry):
            role = changes.role(entry)
            if call.paired:
                speed = judged(entry, call.label, call.size, role, abba(call.slot, settings.rounds),
                               settings.max_slower)
            else:
                speed = new_call(entry, call.label, call.size, role, head_only(call.slot, settings.rounds))
            found.append(speed)
            progress(_line(speed))
    return found


def _line(speed: CallSpeed) -> str:
    """`timed mm m1 (m 1): 12.6 -> 12.7 us, +0.4 % (noise 0.5 %): unchanged`."""
    if speed.base_us is None:
        return f"timed {speed.name}: {speed.head_us:,.1f} us (new)"
    return (f"timed {speed.name}: {speed.base_us:,.1f} -> {speed.head_us:,.1f} us, {speed.change_pct:+.1f} % "
            f"(noise {speed.noise_pct:.1f} %): {speed.verdict}")
