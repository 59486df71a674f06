"""What a run produced (`RunResult`): its tasks run through the workers and summarised, then its JSON document and
the line it closes with; and the progress units each task counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kcontract.builds.builds import Builds
from kcontract.contract.loaded import LoadedContract
from kcontract.family.cases import family_cases
from kcontract.records.record_check import orphan_records
from kcontract.runner.run_tasks import run_tasks
from kcontract.session.plan import Plan
from kcontract.verdict.audit import disagreements, unchecked, without_outcome
from kcontract.verdict.outcome import Outcome, Progress, Task, merge_outcomes
from kcontract.verdict.summary import Summary, summarise


@dataclass
class RunResult:
    """What a run produced: the outcomes by kind, their summary and the gate each control is planted at; once the
    tasks ran to their end, the JSON document; at the run's end, the line it closes with and its exit code."""

    entries: list[Outcome] = field(default_factory=list)
    controls: list[Outcome] = field(default_factory=list)
    summary: Summary | None = None  # None until the outcomes are summarised (and where no task ran)
    planted: dict[str, int] = field(default_factory=dict)
    plan: Plan | None = None  # the tasks and what planned them (a shard's coverage for its receipt)
    finished: int = 0  # tasks that ended
    started: int = 0  # tasks the pool was given (a gate split by case is a task per case)
    document: dict | None = None  # the run's JSON document
    line: str | None = None  # the SUMMARY line it closes with (with --stale, the whole receipt's); None if cut short
    exit_code: int = 0

    def ends(self, line: str | None, exit_code: int) -> RunResult:
        """This result, closing with `line` and `exit_code`."""
        self.line, self.exit_code = line, int(exit_code)
        return self


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
    result = RunResult(entries=[o for o in outcomes if o.task.kind == "entry"],
                       controls=[o for o in outcomes if o.task.kind == "control"],
                       planted={c.name: c.gate for c in loaded.controls})
    result.summary = _summary(loaded, tasks, ran, result, whole, empty_ok)
    return result


def _summary(loaded: LoadedContract, tasks: list[Task], ran: list[Outcome], result: RunResult, whole: bool,
             empty_ok: bool) -> Summary:
    """The run's summary, with what it did not check that its plan claims (unless interrupted, or an empty
    shard)."""
    entries, controls, planted = result.entries, result.controls, result.planted
    cases = {t.case for t in tasks}  # one case selected for every task (`--case`), or gates split by case
    summary = summarise(entries, controls, loaded.known_findings, planted, _orphans(loaded, whole),
                        gates=[g for t in tasks for g in t.gates], case=next(iter(cases)) if len(cases) == 1 else None,
                        interpreted=bool(tasks) and all(t.interpret for t in tasks))
    if not summary.interrupted and (tasks or not empty_ok):
        summary.unchecked = unchecked(tasks, ran) + disagreements(summary, tasks)
    return summary


def _orphans(loaded: LoadedContract, whole: bool) -> list[str]:
    """A whole run of a contract with CUDA kernels notes record files with no entry."""
    return orphan_records(loaded) if whole and any(e.kernel.compiled is not None for e in loaded.entries) else []
