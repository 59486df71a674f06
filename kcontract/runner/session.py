"""A whole run: tasks through workers (or in process), progress reported, outcomes and the summary."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from kcontract.contract.loaded import LoadedContract
from kcontract.records.gate5 import orphan_records
from kcontract.report.summary import Summary, summarise
from kcontract.runner.outcome import Outcome, Progress, Task
from kcontract.runner.plan import merge_outcomes
from kcontract.runner.pool import in_process, run_in_workers


@dataclass
class RunResult:
    """What a run produced."""

    entries: list[Outcome]
    controls: list[Outcome]
    summary: Summary
    planted: dict[str, int]


def work_units(loaded: LoadedContract, tasks: list[Task]) -> int:
    """Progress units: every case of every gate of every task (a records gate counts one)."""
    total = 0
    for task in tasks:
        family = loaded.entry(task.entry).family
        for gate in task.gates:
            cases = family.cases(gate)
            total += 1 if not cases else (1 if task.case is not None else len(cases))
    return total


def auto_jobs() -> int:
    """Workers for `--jobs auto`: one per core, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


def run_tasks(tasks: list[Task], jobs: int, on_progress: Callable[[Progress], None],
              on_done: Callable[[Outcome], None]) -> list[Outcome]:
    """Run tasks in worker processes; in this process when KCONTRACT_IN_PROCESS=1."""
    if in_process():
        from kcontract.runner.execute import execute

        outcomes = []
        for task in tasks:
            outcomes.append(execute(task, on_progress))
            on_done(outcomes[-1])
        return outcomes
    return run_in_workers(tasks, jobs, on_progress, on_done)


def run_contract(loaded: LoadedContract, tasks: list[Task], jobs: int, on_progress: Callable[[Progress], None],
                 on_done: Callable[[Outcome], None], whole: bool) -> RunResult:
    """Run every task and summarise; a whole-contract run also fails on record files with no entry."""
    outcomes = merge_outcomes(run_tasks(tasks, jobs, on_progress, on_done))
    entries = [o for o in outcomes if o.task.kind == "entry"]
    controls = [o for o in outcomes if o.task.kind == "control"]
    planted = {c.name: c.gate for c in loaded.controls}
    notes = orphan_records(loaded) if whole and any(e.kernel.cuda is not None for e in loaded.entries) else []
    summary = summarise(entries, controls, loaded.known_findings, planted, notes)
    return RunResult(entries, controls, summary, planted)
