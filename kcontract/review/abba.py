"""The ABBA schedule: per round, one call's base build (A) and head build (B) are timed A B B A, so a GPU whose
speed drifts linearly over the round weighs on both sides alike; the two A slots of a round give the noise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

BASE, HEAD = "base", "head"
SCHEDULE = (BASE, HEAD, HEAD, BASE)  # one round's slots, in the order they are timed

Slot = Callable[[str], float]  # times one slot of one call on a side (BASE or HEAD): microseconds


@dataclass
class Rounds:
    """A call's slot times, per round and in the order taken, for each side."""

    base: list[list[float]] = field(default_factory=list)
    head: list[list[float]] = field(default_factory=list)

    def of(self, side: str) -> list[float]:
        """Every slot time of one side."""
        return [t for times in (self.base if side == BASE else self.head) for t in times]


def abba(slot: Slot, rounds: int) -> Rounds:
    """`rounds` rounds of the schedule, each slot timed by `slot` in turn."""
    taken = Rounds()
    for _ in range(rounds):
        times: dict[str, list[float]] = {BASE: [], HEAD: []}
        for side in SCHEDULE:
            times[side].append(slot(side))
        taken.base.append(times[BASE])
        taken.head.append(times[HEAD])
    return taken


def head_only(slot: Slot, rounds: int) -> Rounds:
    """A call with no base build: its head timed in as many slots as the schedule gives it."""
    per_round = SCHEDULE.count(HEAD)
    return Rounds(head=[[slot(HEAD) for _ in range(per_round)] for _ in range(rounds)])
