"""A whole run: tasks through workers (or in process), progress reported, outcomes and the summary."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from kcontract.builds.builds import Builds
from kcontract.contract.loaded import LoadedContract
from kcontract.family.cases import family_cases, main_cases
from kcontract.capacity import free_gpu_memory, physical_memory, size_text, usable_cores
from kcontract.records.record_check import orphan_records
from kcontract.runner.budget import WORKER_DEVICE_FLOOR, device_budget
from kcontract.runner.job import jobs_for
from kcontract.runner.plan import device_bytes
from kcontract.runner.pool import in_process, run_in_workers
from kcontract.verdict.audit import disagreements, unchecked, without_outcome
from kcontract.verdict.outcome import OUT_OF_MEMORY, Outcome, Progress, Task, merge_outcomes
from kcontract.verdict.summary import Summary, summarise


@dataclass
class RunResult:
    """What a run produced."""

    entries: list[Outcome]
    controls: list[Outcome]
    summary: Summary
    planted: dict[str, int]


def work_units(loaded: LoadedContract, tasks: list[Task]) -> dict[tuple, int]:
    """Progress units per task (by Task.key): every case of every gate it runs (a records gate counts one)."""
    units = {}
    for task in tasks:
        family = loaded.entry(task.entry).family
        cases = [family_cases(family, gate) for gate in task.gates]
        units[task.key] = sum(1 if not c or task.case is not None else len(c) for c in cases)
    return units


HOST_WORKER_FLOOR = 1 << 30  # host memory a worker holds at least (interpreter, CUDA context, buffers)


def auto_jobs(loaded: LoadedContract, gpu: bool) -> tuple[int, str]:
    """Workers for `--jobs auto` and why: one per core, as many as host memory holds at the contract's largest
    case, and (when tasks use the GPU) as many as its free memory holds at twice a worker's floor; the device
    budget then starts each task once its largest case fits."""
    cores = usable_cores()
    need = max([HOST_WORKER_FLOOR] + [e.family.case_bytes(c) for e in loaded.entries for c in main_cases(e.family)])
    host = physical_memory() // need if physical_memory() else cores
    jobs, why = min(cores, host), [f"{cores} cores", f"{size_text(physical_memory())} host / {size_text(need)}"]
    if gpu:
        free, largest = free_gpu_memory(), max([0] + [device_bytes(e) for e in loaded.entries])
        jobs = min(jobs, free // (2 * WORKER_DEVICE_FLOOR))
        why.append(f"{size_text(free)} GPU free, each task started once its largest case fits (at most "
                   f"{size_text(largest)})")
    jobs = max(1, jobs)
    return jobs, f"{jobs} workers ({', '.join(why)})"


def run_tasks(loaded: LoadedContract, tasks: list[Task], jobs: int, on_progress: Callable[[Progress], None],
              on_done: Callable[[Outcome], None], gpu: bool = False, durations: dict | None = None,
              builds: Builds | None = None, device_sm: str | None = None) -> list[Outcome]:
    """Run tasks as jobs (jobs_for: their kernels from `builds`, built for the GPU of `device_sm`) in worker
    processes (on a GPU within its free memory), the longest first by `durations` (seconds per kind, name and gate
    when they last ran); in this process when KCONTRACT_IN_PROCESS=1."""
    work = jobs_for(loaded, tasks, builds or Builds.of(loaded, jobs=usable_cores()), device_sm)
    if in_process():
        from kcontract.runner.execute import execute

        outcomes = []
        try:
            for job in work:
                outcomes.append(execute(job, on_progress))
                on_done(outcomes[-1])
        except KeyboardInterrupt:
            outcomes += [Outcome(t, status="interrupted", detail="the run was interrupted")
                         for t in tasks[len(outcomes):]]
        return outcomes
    budget = device_budget(tasks, jobs, free_gpu_memory()) if gpu else None
    if jobs == 1:
        return run_in_workers(work, jobs, on_progress, on_done, budget, durations)
    outcomes = run_in_workers(work, jobs, on_progress, lambda o: o.status == OUT_OF_MEMORY or on_done(o), budget,
                              durations)  # one that ran out of memory is reported when it ran alone
    return alone_after_out_of_memory(work, outcomes, on_progress, on_done)


def alone_after_out_of_memory(work: list, outcomes: list[Outcome | None], on_progress: Callable[[Progress], None],
                              on_done: Callable[[Outcome], None]) -> list[Outcome | None]:
    """Tasks that found too little device memory beside others run again, one at a time with the whole device (no
    pool cap), before anything is judged; a task that runs out of memory alone fails as it ended."""
    again = [i for i, o in enumerate(outcomes) if o is not None and o.status == OUT_OF_MEMORY]
    if not again:
        return outcomes
    alone = [dataclasses.replace(work[i], task=dataclasses.replace(work[i].task, device_bytes=0)) for i in again]
    redone = run_in_workers(alone, 1, on_progress, on_done)
    found = list(outcomes)
    for i, outcome in zip(again, redone):
        if outcome is not None:
            outcome.task = work[i].task
            outcome.detail = (outcome.detail + "; " if outcome.detail else "") + "ran alone after running out of " \
                                                                                 "device memory beside other tasks"
        found[i] = outcome
    return found


def run_contract(loaded: LoadedContract, tasks: list[Task], jobs: int, on_progress: Callable[[Progress], None],
                 on_done: Callable[[Outcome], None], whole: bool, gpu: bool = False,
                 durations: dict | None = None, empty_ok: bool = False, builds: Builds | None = None,
                 device_sm: str | None = None) -> RunResult:
    """Run every task and summarise; a whole-contract run also fails on record files with no entry, and a run that
    did not check what its plan claims fails (verdict/audit.py; `empty_ok`: a shard may hold no task)."""
    ran = without_outcome(tasks, run_tasks(loaded, tasks, jobs, on_progress, on_done, gpu, durations, builds,
                                           device_sm))
    outcomes = merge_outcomes(ran)
    entries = [o for o in outcomes if o.task.kind == "entry"]
    controls = [o for o in outcomes if o.task.kind == "control"]
    planted = {c.name: c.gate for c in loaded.controls}
    notes = orphan_records(loaded) if whole and any(e.kernel.cuda is not None for e in loaded.entries) else []
    summary = summarise(entries, controls, loaded.known_findings, planted, notes,
                        gates=[g for t in tasks for g in t.gates], case=tasks[0].case if tasks else None)
    if not summary.interrupted and (tasks or not empty_ok):
        summary.unchecked = unchecked(tasks, ran) + disagreements(summary, tasks)
    return RunResult(entries, controls, summary, planted)
