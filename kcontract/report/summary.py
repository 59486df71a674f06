"""The verdict over all outcomes: counts, the SUMMARY line and the exit code."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcontract.contract.model import KnownFinding
from kcontract.exitcodes import ExitCode
from kcontract.runner.outcome import Outcome

RECORDS_GATE = 5  # launch records: counted as limit problems, not in "pass gates 1-4"


@dataclass
class Summary:
    """Counts behind the SUMMARY line."""

    kernels: int = 0
    passed: int = 0
    failed: int = 0
    known: int = 0
    controls: int = 0
    red: int = 0
    missed: int = 0
    limit_problems: int = 0
    limits_ok: bool = True  # records current and limit problems within the baseline
    failing_entries: list[str] = field(default_factory=list)
    missed_controls: list[str] = field(default_factory=list)
    stale_known: list[str] = field(default_factory=list)  # known findings whose gate now passes
    record_failures: list[str] = field(default_factory=list)  # entries whose gate 5 went red
    notes: list[str] = field(default_factory=list)  # contract-level record problems (a record with no entry)
    environment: list[str] = field(default_factory=list)  # why this machine could not run a task (exit 3)

    def line(self) -> str:
        """The one line every run ends with."""
        return (f"SUMMARY {self.kernels} kernels: {self.passed} pass gates 1-4, {self.failed} fail, "
                f"{self.known} known findings; {self.controls} controls: {self.red} red as planted, "
                f"{self.missed} missed; {self.limit_problems} limit problems")

    @property
    def exit_code(self) -> ExitCode:
        """0 only when nothing failed, no control was missed and the launch records hold; 3 when the machine
        could not run a task (a GPU that cannot load the cubins, say)."""
        if self.environment:
            return ExitCode.ENVIRONMENT
        ok = self.failed == 0 and self.missed == 0 and self.limits_ok
        return ExitCode.OK if ok else ExitCode.FAILED


def summarise(entries: list[Outcome], controls: list[Outcome], known: list[KnownFinding],
              control_gates: dict[str, int], record_notes: list[str] = ()) -> Summary:
    """Entries pass when every red gate 1-4 is a known finding; controls count when red at their gate.

    Gate 5 of every entry adds its limit problems; a red gate 5 (or a record with no entry) fails the run
    through `limits_ok`, not through the entry count.
    """
    accepted = {(k.entry, k.gate) for k in known}
    s = Summary(kernels=len(entries), controls=len(controls), limits_ok=not record_notes, notes=list(record_notes))
    s.environment = sorted({o.detail for o in [*entries, *controls] if o.status == "environment"})
    for outcome in entries:
        name = outcome.task.name
        red = outcome.failed_gates()
        unexplained = [g for g in red if (name, g) not in accepted or outcome.status != "ran"]
        s.known += len(red) - len(unexplained)
        if any(g != RECORDS_GATE for g in unexplained) or outcome.status != "ran":
            s.failed += 1
            s.failing_entries.append(name)
        else:
            s.passed += 1
        if RECORDS_GATE in unexplained:
            s.limits_ok = False
            s.record_failures.append(name)
        records = outcome.gates.get(RECORDS_GATE)
        if records is not None:
            s.limit_problems += int(records.facts.get("limit_problems", 0))
    ran = {(o.task.name, g): r.passed for o in entries if o.status == "ran" for g, r in o.gates.items()}
    s.stale_known = [f"{k.entry} gate {k.gate}" for k in known if ran.get((k.entry, k.gate)) is True]
    for outcome in controls:
        planted = control_gates[outcome.task.name]
        if outcome.status == "ran" and planted in outcome.failed_gates():
            s.red += 1
        else:
            s.missed += 1
            s.missed_controls.append(outcome.task.name)
    return s
