"""A run's tasks as jobs through the workers (or in this process), each outcome reported as it comes."""

from __future__ import annotations

import dataclasses
from typing import Callable

from kcontract.builds.builds import Builds
from kcontract.capacity import free_gpu_memory, usable_cores
from kcontract.contract.loaded import LoadedContract
from kcontract.runner.budget import device_budget
from kcontract.runner.job import jobs_for
from kcontract.runner.pool import in_process, run_in_workers
from kcontract.verdict.outcome import OUT_OF_MEMORY, Outcome, Progress, Task


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
            outcome.task, outcome.spans = work[i].task, outcomes[i].spans + outcome.spans
            outcome.detail = (outcome.detail + "; " if outcome.detail else "") + "ran alone after running out of " \
                                                                                 "device memory beside other tasks"
        found[i] = outcome
    return found
