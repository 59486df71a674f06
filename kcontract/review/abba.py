"""The ABBA schedule: per round, one call's base build (A), head build (B) and placebo (P: the base's build loaded
again, with its own copy of the inputs) are timed A P B B P A, so a GPU whose speed drifts linearly over the round
weighs on every side alike; the pairs of slots of one side, and the placebo against A, give the noise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

BASE, HEAD, PLACEBO = "base", "head", "placebo"
SCHEDULE = (BASE, PLACEBO, HEAD, HEAD, PLACEBO, BASE)  # one round's slots, in the order they are timed

Slot = Callable[[str], float]  # times one slot of one call on a side (BASE, HEAD or PLACEBO): microseconds


@dataclass
class Rounds:
    """A call's slot times, per round and in the order taken, for each side."""

    base: list[list[float]] = field(default_factory=list)
    head: list[list[float]] = field(default_factory=list)
    placebo: list[list[float]] = field(default_factory=list)

    def sides(self) -> dict[str, list[list[float]]]:
        """Each side's slot times per round."""
        return {BASE: self.base, HEAD: self.head, PLACEBO: self.placebo}

    def of(self, side: str) -> list[float]:
        """Every slot time of one side."""
        return [t for times in self.sides()[side] for t in times]


def abba(slot: Slot, rounds: int) -> Rounds:
    """`rounds` rounds of the schedule, each slot timed by `slot` in turn."""
    taken = Rounds()
    for _ in range(rounds):
        times: dict[str, list[float]] = {side: [] for side in SCHEDULE}
        for side in SCHEDULE:
            times[side].append(slot(side))
        for side, kept in taken.sides().items():
            kept.append(times[side])
    return taken


def head_only(slot: Slot, rounds: int) -> Rounds:
    """A call with no base build: its head timed in as many slots as the schedule gives it."""
    per_round = SCHEDULE.count(HEAD)
    return Rounds(head=[[slot(HEAD) for _ in range(per_round)] for _ in range(rounds)])
