"""A run's tasks through the workers and what they produced: the outcomes by kind, the summary, the gates the
controls are planted at; and the progress units each task counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kcontract.builds.builds import Builds
from kcontract.contract.loaded import LoadedContract
from kcontract.family.cases import family_cases
from kcontract.records.record_check import orphan_records
from kcontract.runner.run_tasks import run_tasks
from kcontract.verdict.audit import disagreements, unchecked, without_outcome
from kcontract.verdict.outcome import Outcome, Progress, Task, merge_outcomes
from kcontract.verdict.summary import Summary, summarise


@dataclass
class RunResult:
    """What a run produced."""

    entries: list[Outcome]
    controls: list[Outcome]
    summary: Summary | None = None  # None until the outcomes are summarised
    planted: dict[str, int] = field(default_factory=dict)  # the gate each control is planted at


def work_units(loaded: LoadedContract, tasks: list[Task]) -> dict[tuple, int]:
    """Progress units per task (by Task.key): every case of every gate it runs (a records gate counts one)."""
    units = {}
    for task in tasks:
        family = loaded.entry(task.entry).family
        cases = [family_cases(family, gate) for gate in task.gates]
        units[task.key] = sum(1 if not c or task.case is not None else len(c) for c in cases)
    return units


def run_contract(loaded: LoadedContract, tasks: list[Task], jobs: int, on_progress: Callable[[Progress], None],
                 on_done: Callable[[Outcome], None], whole: bool, gpu: bool = False,
                 durations: dict | None = None, empty_ok: bool = False, builds: Builds | None = None,
                 device_sm: str | None = None) -> RunResult:
    """Run every task and summarise; a whole-contract run also fails on record files with no entry, and a run that
    did not check what its plan claims fails (verdict/audit.py; `empty_ok`: a shard may hold no task)."""
    ran = without_outcome(tasks, run_tasks(loaded, tasks, jobs, on_progress, on_done, gpu, durations, builds,
                                           device_sm))
    outcomes = merge_outcomes(ran)
    result = RunResult([o for o in outcomes if o.task.kind == "entry"],
                       [o for o in outcomes if o.task.kind == "control"], planted={c.name: c.gate for c in loaded.controls})
    result.summary = _summary(loaded, tasks, ran, result, whole, empty_ok)
    return result


def _summary(loaded: LoadedContract, tasks: list[Task], ran: list[Outcome], result: RunResult, whole: bool,
             empty_ok: bool) -> Summary:
    """The run's summary, with what it did not check that its plan claims (unless interrupted, or an empty
    shard)."""
    entries, controls, planted = result.entries, result.controls, result.planted
    summary = summarise(entries, controls, loaded.known_findings, planted, _orphans(loaded, whole),
                        gates=[g for t in tasks for g in t.gates], case=tasks[0].case if tasks else None)
    if not summary.interrupted and (tasks or not empty_ok):
        summary.unchecked = unchecked(tasks, ran) + disagreements(summary, tasks)
    return summary


def _orphans(loaded: LoadedContract, whole: bool) -> list[str]:
    """A whole run of a contract with CUDA kernels notes record files with no entry."""
    return orphan_records(loaded) if whole and any(e.kernel.cuda is not None for e in loaded.entries) else []
