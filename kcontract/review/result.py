"""A review's findings in one object, its failures and exit code, and the REVIEW line it closes with."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcontract.exitcodes import ExitCode
from kcontract.review.changes import Changes
from kcontract.review.contract import ContractPart
from kcontract.review.speed import CHANGED, NEW, CallSpeed, Settings
from kcontract.sassdiff.diff import EQUAL, SassDiff
from kcontract.verdict.summary import plural


@dataclass
class Revision:
    """A revision as given and the commit it names (None: the working tree)."""

    given: str
    commit: str | None

    @property
    def short(self) -> str:
        """`054b922a1b2c`, or `working tree`."""
        return self.commit[:12] if self.commit else "working tree"


@dataclass
class Review:
    """What changed, the contract, and the speed against the base."""

    base: Revision
    head: Revision
    environment: dict[str, object]
    diff: SassDiff
    changes: Changes
    contract: ContractPart
    speed: list[CallSpeed]
    settings: Settings
    notes: list[str] = field(default_factory=list)  # what the review could not do, and why

    @property
    def slower(self) -> list[CallSpeed]:
        """Calls slower than the limit beyond the noise."""
        return [c for c in self.speed if c.fails]

    def failures(self) -> list[str]:
        """Why the review fails, a line each: a kernel that does not compile, a red row, a call too slow."""
        found = [f"does not compile: {line.splitlines()[0]}" for line in self.diff.failures]
        if self.contract.fails:
            found.append(f"the contract fails at the head: {self.contract.head_summary}")
        limit = self.settings.max_slower
        found += [f"{c.name} is slower: {c.base_us:,.1f} -> {c.head_us:,.1f} us, {c.change_pct:+.1f} % (noise "
                  f"{c.noise_pct:.1f} %, limit {limit:g} %)" for c in self.slower]
        return found

    @property
    def exit_code(self) -> int:
        """1 where the review fails, else 0."""
        return int(ExitCode.FAILED if self.failures() else ExitCode.OK)

    def functions_changed(self) -> tuple[int, int]:
        """(functions whose machine code is not equal on some SM, functions compared)."""
        functions = {(r.label, r.expression) for r in self.diff.results}
        moved = {(r.label, r.expression) for r in self.diff.results if r.verdict not in EQUAL}
        return len(moved), len(functions)

    def line(self) -> str:
        """`REVIEW pass: ...` or `REVIEW FAIL: ...` (the first failure, naming the call): the line a review ends
        with."""
        failures = self.failures()
        if failures:
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            return f"REVIEW FAIL: {failures[0]}{more}"
        moved, functions = self.functions_changed()
        timed = [c for c in self.speed if c.verdict != NEW]
        new = len(self.speed) - len(timed)
        return (f"REVIEW pass: {moved} of {functions} functions changed, {plural(len(self.contract.reran), 'row')} "
                f"re-ran green, {plural(len(timed), 'call')} within the noise + {self.settings.max_slower:g} %"
                + (f", {new} new" if new else ""))

    def calls(self, role: str) -> list[CallSpeed]:
        """The changed entries' calls (new ones among them), or the current callers'."""
        return [c for c in self.speed if (c.role == CHANGED) == (role == CHANGED)]
