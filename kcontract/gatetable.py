"""The contract's gate numbers and the kinds of check they name: the one table the rest of kcontract reads.

Gate numbers are the contract's and the CLI's names (`--gate 3`, `gate: 3`, the SUMMARY line); every decision
is made on a gate's kind or suite, never on its number. Gates 1, 3 and 4 are one range check run on three of a
family's input suites; gate 2 compares variant runs bit for bit; gate 5 compares compiled launch resources
with committed records.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    """What a gate checks."""

    RANGES = "ranges"  # every output inside a rigorous float64 range; bit-equal where the range is decided
    INVARIANCE = "invariance"  # a base run's rows bit-equal in every variant run that contains them
    RECORDS = "records"  # compiled launch resources equal the committed records, within every SM's limits


class Suite(str, Enum):
    """A family's input suite: what a gate feeds the kernel."""

    REALISTIC = "realistic"  # realistic value ranges at the entry's shapes
    VARIANTS = "variants"  # the same rows in other batches, slots, splits, streams and runs
    STRESS = "stress"  # split reductions whose partials differ wildly in magnitude and sign
    EXACT = "exact"  # inputs on which every intermediate is exact, so the output is known exactly


@dataclass(frozen=True)
class Gate:
    """One row of the table."""

    number: int
    kind: Kind
    suite: Suite | None  # the family suite a launching gate runs; None for records
    title: str

    @property
    def launches(self) -> bool:
        """Whether the gate runs the kernel (and so needs a device for a CUDA or device kernel)."""
        return self.kind is not Kind.RECORDS

    @property
    def references(self) -> bool:
        """Whether the gate judges outputs against float64 references (an invariance gate compares runs)."""
        return self.kind is Kind.RANGES

    @property
    def judged(self) -> bool:
        """Whether the SUMMARY's `pass gates ...` counts it (records have their own clauses)."""
        return self.kind is not Kind.RECORDS


TABLE: tuple[Gate, ...] = (
    Gate(1, Kind.RANGES, Suite.REALISTIC, "exactness vs float64"),
    Gate(2, Kind.INVARIANCE, Suite.VARIANTS, "order independence"),
    Gate(3, Kind.RANGES, Suite.STRESS, "split-merge stress"),
    Gate(4, Kind.RANGES, Suite.EXACT, "exact-sum inputs"),
    Gate(5, Kind.RECORDS, None, "launch records"),
)
NUMBERS: tuple[int, ...] = tuple(g.number for g in TABLE)
_BY_NUMBER = {g.number: g for g in TABLE}


def gate(number: int) -> Gate:
    """The table's row for a gate number (KeyError for a number the contract does not know)."""
    return _BY_NUMBER[number]


def records_gate() -> Gate:
    """The gate that checks launch records."""
    return next(g for g in TABLE if g.kind is Kind.RECORDS)


def exactness_gate() -> Gate:
    """The range gate on realistic inputs: its decided outputs bit-equal and outputs within range are the exactness
    a review counts."""
    return next(g for g in TABLE if g.kind is Kind.RANGES and g.suite is Suite.REALISTIC)


def launching() -> tuple[int, ...]:
    """Gates that run kernels."""
    return tuple(g.number for g in TABLE if g.launches)


def judged_numbers() -> tuple[int, ...]:
    """The gates the SUMMARY's `pass gates ...` names on a whole run."""
    return tuple(g.number for g in TABLE if g.judged)


def fed_by(suites, compiled: bool) -> list[int]:
    """The gates an entry runs by default: those whose suite its family feeds, and records for compiled kernels."""
    return [g.number for g in TABLE if (g.suite in suites if g.suite is not None else compiled)]


def title(number: int) -> str:
    """`gate 3 (split-merge stress)`."""
    return f"gate {number} ({gate(number).title})"
