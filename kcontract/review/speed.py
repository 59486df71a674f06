"""A timed call judged: base and head as the medians of their slots, the change in percent, the noise floor (A
against A, B against B, P against P, and the placebo P, the base loaded again, against A), and the verdict:
unchanged within the noise, faster, slower, or slower beyond the limit (the review fails)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from kcontract.review.abba import BASE, HEAD, PLACEBO, Rounds

UNCHANGED, FASTER, SLOWER, TOO_SLOW, NEW = "unchanged", "faster", "slower", "too slow", "new"
CHANGED, CALLER = "changed", "caller"  # why a call is timed: its entry's kernel changed, or it shares the source


@dataclass(frozen=True)
class Settings:
    """How calls are timed and judged: ABBA rounds, event timings per slot, the slowdown beyond the noise that
    fails."""

    rounds: int = 2
    repeat: int = 25
    max_slower: float = 2.0


@dataclass
class CallSpeed:
    """One bench call of one entry, timed on both builds (or the head's only, for a new call)."""

    entry: str
    call: str  # the family's label of the call
    size: str  # `rows 4, n 4096`
    role: str  # CHANGED or CALLER
    head_us: float
    base_us: float | None = None
    change_pct: float | None = None
    noise_pct: float | None = None
    verdict: str = NEW
    slots: dict[str, list[list[float]]] = field(default_factory=dict)  # each side's slot times, per round

    @property
    def name(self) -> str:
        """`matmul_qkv m1 (rows 1)`: how the review names the call."""
        return f"{self.entry} {self.call} ({self.size})"

    @property
    def fails(self) -> bool:
        """Slower than the limit beyond the noise."""
        return self.verdict == TOO_SLOW


def noise_pct(rounds: Rounds) -> float:
    """The noise floor, in percent: the largest spread between two slots of one side in a round (of their mean),
    and the placebo's median against the base's: what timing one build twice, or loading it again with its inputs
    elsewhere, changes."""
    pairs = [a for times in rounds.sides().values() for a in times]
    spreads = [100.0 * (max(a) - min(a)) / statistics.fmean(a) for a in pairs if len(a) > 1 and min(a) > 0]
    base, placebo = rounds.of(BASE), rounds.of(PLACEBO)
    if base and placebo and statistics.median(base) > 0:
        spreads.append(100.0 * abs(statistics.median(placebo) / statistics.median(base) - 1.0))
    return max(spreads, default=0.0)


def verdict(change: float, noise: float, max_slower: float) -> str:
    """Unchanged within the noise; else faster, slower, or too slow where the change passes the noise by more
    than `max_slower` percent."""
    if abs(change) <= noise:
        return UNCHANGED
    if change < 0:
        return FASTER
    return TOO_SLOW if change - noise > max_slower else SLOWER


def judged(entry: str, call: str, size: str, role: str, rounds: Rounds, max_slower: float) -> CallSpeed:
    """A call timed ABBA, judged: base and head are the medians of their slots."""
    base, head = statistics.median(rounds.of(BASE)), statistics.median(rounds.of(HEAD))
    change = 100.0 * (head - base) / base if base > 0 else 0.0
    noise = noise_pct(rounds)
    return CallSpeed(entry, call, size, role, head, base, change, noise, verdict(change, noise, max_slower),
                     rounds.sides())


def new_call(entry: str, call: str, size: str, role: str, rounds: Rounds) -> CallSpeed:
    """A call the base does not make: the median of its head slots."""
    return CallSpeed(entry, call, size, role, statistics.median(rounds.of(HEAD)), slots={HEAD: rounds.head})


def noise_floor(calls: list[CallSpeed]) -> float | None:
    """The largest noise of the calls timed against the base (None where none was)."""
    found = [c.noise_pct for c in calls if c.noise_pct is not None]
    return max(found) if found else None
