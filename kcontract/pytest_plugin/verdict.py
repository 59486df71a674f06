"""An item's verdict from its task's outcome, by kcontract's own rules, with kcontract's own lines."""

from __future__ import annotations

import io
from dataclasses import dataclass

from rich.console import Console

from kcontract.report.lines import gate_line, status_line
from kcontract.report.tables import print_failures
from kcontract.verdict.audit import gaps
from kcontract.verdict.outcome import Outcome
from kcontract.verdict.summary import summarise


@dataclass
class Verdict:
    """What the item reports: `state` is passed, failed, known (a known finding), or skipped (nothing ran)."""

    state: str
    text: str  # the failure's lines, a known finding's, or the gate's line
    note: str = ""  # a known finding whose gate passes now


def failure_text(outcome: Outcome, planted: dict[str, int] | None, verbose: bool) -> str:
    """The lines `kcontract run` prints for the outcome: how a task ended, or each red gate's offender and replay."""
    if outcome.status != "ran":
        return status_line(outcome) + (f"\n{outcome.trace.rstrip()}" if verbose and outcome.trace else "")
    buffer = io.StringIO()
    console = Console(file=buffer, soft_wrap=True, highlight=False, color_system=None, width=10_000)
    print_failures(console, [outcome], planted=planted, verbose=verbose)
    return buffer.getvalue().rstrip() or "\n".join(gate_line(outcome.task, r) for r in outcome.gates.values())


def judge_entry(outcome: Outcome, known, contract: str, verbose: bool) -> Verdict:
    """An entry's gate passes when green, or red as a known finding of the contract (and the task ran)."""
    summary = summarise([outcome], [], known, {}, gates=outcome.task.gates)
    missing = gaps(outcome.task, outcome)
    if missing:
        return Verdict("failed", "\n".join(f"the run did not check what it claims: {why}" for why in missing))
    if summary.failed or summary.record_failures:
        return Verdict("failed", failure_text(outcome, None, verbose))
    if summary.known:
        return Verdict("known", failure_text(outcome, None, verbose))
    result = outcome.gates[outcome.task.gates[0]]
    note = "".join(f"known finding {f} passes now: remove it from known_findings in {contract}"
                   for f in summary.stale_known)
    return Verdict("skipped" if result.skipped else "passed", gate_line(outcome.task, result), note)


def judge_control(outcome: Outcome, planted: int, verbose: bool) -> Verdict:
    """A control passes when it went red at the gate it is planted at; else it was missed."""
    gates = {outcome.task.name: planted}
    summary = summarise([], [outcome], [], gates, gates=outcome.task.gates)
    if summary.red:
        return Verdict("passed", failure_text(outcome, gates, False))
    return Verdict("failed", failure_text(outcome, gates, verbose))
