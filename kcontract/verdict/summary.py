"""The verdict over all outcomes: counts, the SUMMARY line and the exit code.

The line names the gates kernels were judged on: the judged gates the run covered ("gates 1-4" for a whole
run, "gate 1" for `--gate 1`), or the records gate when the run covered no other (kcontract.gatetable says
which is which). Where judged gates ran, the records gate's failures (stale or missing records, limit problems
beyond the baseline, records of entries that are gone) are counted in their own clause, `; N record failures`,
shown when N > 0; its toolchain findings (no records for the toolchain in use, target SMs it cannot build)
likewise in `; N toolchain findings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcontract.contract.model import KnownFinding
from kcontract.exitcodes import ExitCode
from kcontract.gatetable import gate, judged_numbers, records_gate
from kcontract.verdict.outcome import Outcome

RECORDS_GATE = records_gate().number  # counted in their own clauses where judged gates ran


def gates_phrase(gates: list[int]) -> str:
    """`gates 1-4`, `gate 1`, `gates 1 and 3`, `gates 1, 2 and 4`, `gates 1-3`."""
    gates = sorted(set(gates))
    if len(gates) == 1:
        return f"gate {gates[0]}"
    if len(gates) > 2 and gates == list(range(gates[0], gates[-1] + 1)):
        return f"gates {gates[0]}-{gates[-1]}"
    return "gates " + ", ".join(map(str, gates[:-1])) + f" and {gates[-1]}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 record failure`, `2 record failures` (`many`: the plural where it is not word + s)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


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
    judged: list[int] = field(default_factory=lambda: list(judged_numbers()))  # the gates kernels pass or fail on
    case: str | None = None  # the one case the run covered (`--case`), if any
    interpreted: bool = False  # its kernels ran through Triton's interpreter on the CPU (`--interpret`)
    failing_entries: list[str] = field(default_factory=list)
    missed_controls: list[str] = field(default_factory=list)
    stale_known: list[str] = field(default_factory=list)  # known findings whose gate now passes
    record_failures: list[str] = field(default_factory=list)  # entries whose records gate went red, beside judged
    notes: list[str] = field(default_factory=list)  # contract-level record problems (a record with no entry)
    findings: list[str] = field(default_factory=list)  # the records gate's toolchain findings, each once
    environment: list[str] = field(default_factory=list)  # why this machine could not run a task (exit 3)
    unchecked: list[str] = field(default_factory=list)  # where the run did not check what its plan claims
    interrupted: bool = False  # the run was cut short (Ctrl-C, SIGTERM)

    @property
    def record_failure_count(self) -> int:
        """Entries whose records gate failed beside judged gates, and record files of entries that are gone."""
        return len(self.record_failures) + len(self.notes)

    def line(self) -> str:
        """The one line every run ends with."""
        covered = gates_phrase(self.judged) + (f" (case {self.case})" if self.case else "") + \
            (" in Triton's interpreter (numpy's bits, not a GPU's)" if self.interpreted else "")
        text = (f"SUMMARY {self.kernels} kernels: {self.passed} pass {covered}, {self.failed} fail, "
                f"{self.known} known findings; {self.controls} controls: {self.red} red as planted, "
                f"{self.missed} missed; {self.limit_problems} limit problems")
        if self.record_failure_count:
            text += f"; {plural(self.record_failure_count, 'record failure')}"
        if self.findings:
            text += f"; {plural(len(self.findings), 'toolchain finding')}"
        if self.unchecked:
            text += f"; {len(self.unchecked)} not checked"
        return text + ("; interrupted" if self.interrupted else "")

    @property
    def exit_code(self) -> ExitCode:
        """0 only when nothing failed, no control was missed, the records held and the plan was checked; 3 when the machine could not run a
        task (a GPU that cannot load the cubins, say); 130 when interrupted."""
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if self.environment:
            return ExitCode.ENVIRONMENT
        ok = self.failed == 0 and self.missed == 0 and not self.record_failure_count and not self.unchecked
        return ExitCode.OK if ok else ExitCode.FAILED


def judged_gates(gates: list[int]) -> list[int]:
    """The gates a run's kernels are judged on: its judged gates, or the records gate when it ran no other."""
    judged = sorted({g for g in gates if gate(g).judged})
    return judged or sorted(set(gates)) or list(judged_numbers())


def summarise(entries: list[Outcome], controls: list[Outcome], known: list[KnownFinding],
              control_gates: dict[str, int], record_notes: list[str] = (), gates: list[int] | None = None,
              case: str | None = None, interpreted: bool = False) -> Summary:
    """Entries pass when every red gate they are judged on is a known finding; controls count when red at their
    gate. `gates` are the gates the run covered (default: every gate that ran)."""
    ran_gates = gates if gates is not None else [g for o in entries + controls for g in o.task.gates]
    judged = judged_gates(ran_gates)
    accepted = {(k.entry, k.gate) for k in known}
    s = Summary(kernels=len(entries), controls=len(controls), judged=judged, case=case, notes=list(record_notes),
                interpreted=interpreted)
    s.environment = sorted({o.detail for o in [*entries, *controls] if o.status == "environment"})
    s.interrupted = any(o.status == "interrupted" for o in [*entries, *controls])
    findings: dict[str, None] = {}
    for outcome in entries:
        name = outcome.task.name
        red = outcome.failed_gates()
        unexplained = [g for g in red if (name, g) not in accepted or outcome.status != "ran"]
        s.known += len(red) - len(unexplained)
        if any(g in judged for g in unexplained) or outcome.status != "ran":
            s.failed += 1
            s.failing_entries.append(name)
        else:
            s.passed += 1
        if RECORDS_GATE in unexplained and RECORDS_GATE not in judged and outcome.status == "ran":
            s.record_failures.append(name)
        records = outcome.gates.get(RECORDS_GATE)
        if records is not None:
            s.limit_problems += int(records.facts.get("limit_problems", 0))
            findings.update(dict.fromkeys(records.facts.get("toolchain_findings", [])))
    s.findings = list(findings)
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
