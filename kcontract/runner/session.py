"""A whole run: tasks through workers (or in process), progress reported, outcomes and the summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kcontract.contract.loaded import LoadedContract
from kcontract.family.cases import family_cases, main_cases
from kcontract.machine import free_gpu_memory, physical_memory, size_text, usable_cores
from kcontract.records.gate5 import orphan_records
from kcontract.verdict.summary import Summary, summarise
from kcontract.verdict.outcome import Outcome, Progress, Task, merge_outcomes
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
            cases = family_cases(family, gate)
            total += 1 if not cases else (1 if task.case is not None else len(cases))
    return total


GPU_WORKER_BYTES = 12 << 30  # device memory one worker may hold: a 262,144-key pool and its re-laid variant
HOST_WORKER_FLOOR = 1 << 30  # host memory a worker holds at least (interpreter, CUDA context, buffers)


def auto_jobs(loaded: LoadedContract, gpu: bool) -> tuple[int, str]:
    """Workers for `--jobs auto` and why: one per core, as many as host memory holds at the contract's largest
    case, and (when tasks use the GPU) as many as its free memory holds at GPU_WORKER_BYTES each."""
    cores = usable_cores()
    need = max([HOST_WORKER_FLOOR] + [e.family.case_bytes(c) for e in loaded.entries for c in main_cases(e.family)])
    host = physical_memory() // need if physical_memory() else cores
    jobs, why = min(cores, host), [f"{cores} cores", f"{size_text(physical_memory())} host / {size_text(need)}"]
    if gpu:
        free = free_gpu_memory()
        jobs = min(jobs, free // GPU_WORKER_BYTES)
        why.append(f"{size_text(free)} GPU free / {size_text(GPU_WORKER_BYTES)}")
    jobs = max(1, jobs)
    return jobs, f"{jobs} workers ({', '.join(why)})"


def run_tasks(tasks: list[Task], jobs: int, on_progress: Callable[[Progress], None],
              on_done: Callable[[Outcome], None]) -> list[Outcome]:
    """Run tasks in worker processes; in this process when KCONTRACT_IN_PROCESS=1."""
    if in_process():
        from kcontract.runner.execute import execute

        outcomes = []
        try:
            for task in tasks:
                outcomes.append(execute(task, on_progress))
                on_done(outcomes[-1])
        except KeyboardInterrupt:
            outcomes += [Outcome(t, status="interrupted", detail="the run was interrupted")
                         for t in tasks[len(outcomes):]]
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
    summary = summarise(entries, controls, loaded.known_findings, planted, notes,
                        gates=[g for t in tasks for g in t.gates], case=tasks[0].case if tasks else None)
    return RunResult(entries, controls, summary, planted)
