"""The progress bar in a terminal: it ends at its total however many of its units the tasks reported (a control
stops at its first red call, a crashed task reports no more cases, a control's trials report a case again)."""

from __future__ import annotations

import io

from rich.console import Console

from kcontract.gates.base import GateResult
from kcontract.report.progress import RunProgress
from kcontract.verdict.outcome import Outcome, Progress, Task


def task(kind: str, name: str, gate: int) -> Task:
    return Task(kind, name, "e", "contract.yaml", [gate], 0)


def test_the_bar_ends_at_its_total_when_tasks_report_fewer_or_more_units_than_counted():
    crashes, stops_red, repeats, records = (task("entry", "e", 1), task("control", "c", 2), task("control", "r", 3),
                                            task("entry", "e", 5))
    units = {crashes.key: 30, stops_red.key: 12, repeats.key: 2, records.key: 1}
    console = Console(force_terminal=True, file=io.StringIO(), width=120)
    with RunProgress(console, units) as progress:
        for case in ("a", "b"):
            progress.step(Progress(crashes, 1, case))
        progress.done(Outcome(crashes, status="crashed", detail="the worker died"))
        progress.step(Progress(stops_red, 2, "a"))
        progress.step(Progress(stops_red, 2, None, GateResult(2, passed=False)))
        progress.done(Outcome(stops_red, gates={2: GateResult(2, passed=False)}))
        for trial in range(3):
            progress.step(Progress(repeats, 3, "a"))
            progress.step(Progress(repeats, 3, "b"))
        progress.done(Outcome(repeats, gates={3: GateResult(3, passed=False)}))
        assert progress.bar.tasks[0].completed == 44
        progress.step(Progress(records, 5, None, GateResult(5, passed=True)))
        progress.done(Outcome(records, gates={5: GateResult(5, passed=True)}))
        assert progress.bar.tasks[0].completed == progress.bar.tasks[0].total == 45
    assert "45/45" in console.file.getvalue()
