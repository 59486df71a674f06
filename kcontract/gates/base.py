"""What every gate returns: counts, a verdict and the worst offender with a replay command."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STOPPED = " (a control stops at its first red call)"  # said where a control's gate did not run every call


@dataclass
class Offender:
    """The worst element a gate saw, with everything needed to find and replay it."""

    case: str
    coords: dict[str, int]  # named by the family's axes, e.g. {"row": 3, "col": 17}
    got: str  # value and bits, e.g. "0.4121 (0x3ed3)"
    expected: str  # value and bits, or the range
    detail: str = ""  # e.g. "3 ulps above hi", "differs from solo in variant batch7_last"


@dataclass
class GateResult:
    """One entry x gate: what was checked and whether it passed."""

    gate: int
    passed: bool
    checked: int = 0  # outputs compared
    decided: int = 0  # outputs whose range rounds to one value (gate 1, 3, 4)
    bit_equal: int = 0  # decided outputs bit-equal to the reference
    within: int = 0  # undecided outputs inside their range
    failures: int = 0  # outputs out of range, not bit-equal, NaN or unwritten
    skipped: bool = False  # the family has no cases for this gate's suite: nothing ran, and the result says so
    worst: Offender | None = None
    replay: str = ""  # the command that reproduces this gate's run
    message: str = ""  # one line: what went wrong, or a fact worth printing
    causes: tuple[str, ...] = ()  # on failure: what such a failure usually means, in the family's words
    facts: dict[str, Any] = field(default_factory=dict)  # per-gate extras (decided %, miss factors)
    seconds: float = 0.0  # wall time of the gate, inputs and references included
    profile: dict[str, Any] = field(default_factory=dict)  # seconds per stage, peak memory, cache use

    @property
    def status(self) -> str:
        """'pass', 'skip' or 'FAIL'."""
        return "skip" if self.skipped else ("pass" if self.passed else "FAIL")


def judged(r: GateResult, failing: str) -> GateResult:
    """Passed where nothing failed and something was checked; the message says that nothing was, or how many of
    the checked outputs failed (`failing`: what a failure is, e.g. "outputs changed bits across runs")."""
    r.passed = r.failures == 0 and r.checked > 0
    if r.checked == 0:
        r.message = "checked zero outputs: the gate proved nothing"
    elif r.failures:
        r.message = f"{r.failures} of {r.checked} {failing}" + STOPPED * ("stopped_at_case" in r.facts)
    return r

