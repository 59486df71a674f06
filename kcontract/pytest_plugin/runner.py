"""Tasks run one at a time in a reused kcontract worker, so a kernel that aborts or hangs never takes pytest down.

Each contract's environment is checked (and its cubins built) once, before its first task, as `kcontract run`
does before any; a GPU task is skipped with the reason where this machine has no usable GPU.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time

from kcontract.builds.builds import Builds
from kcontract.errors import KContractError
from kcontract.gatetable import launching
from kcontract.launch import gpu_problem
from kcontract.capacity import usable_cores
from kcontract.runner.execute import execute
from kcontract.runner.job import jobs_for
from kcontract.runner.pool import Pool, Workers, in_process
from kcontract.verdict.outcome import Outcome, Task


def needs_gpu(run, task: Task) -> bool:
    """Whether the task launches a CUDA or device kernel (the records gate compiles, and needs no GPU)."""
    return run.kernel(task).launcher() != "python" and any(g in launching() for g in task.gates)


def gpu_skip_reason(run, task: Task) -> str | None:
    """Why this machine cannot run a GPU task, or None."""
    if not needs_gpu(run, task):
        return None
    why = gpu_problem()
    return None if why is None else f"{run.kernel(task).label} needs a CUDA GPU and CuPy: {why}"


class TaskRunner:
    """The session's worker (in this process where KCONTRACT_IN_PROCESS=1) and each contract's checked setup."""

    def __init__(self) -> None:
        self.began = time.time()  # wall clock, as cache items are stamped
        self.workers = Workers()
        self.pool = Pool(self.workers)
        self.prepared: dict[str, str | None] = {}  # contract -> None when ready, else the ERROR lines
        self.built: dict[str, tuple[Builds, str | None]] = {}  # contract -> its Builds and the GPU's SM

    def prepare(self, run, tasks: list[Task]) -> str | None:
        """Check the environment the contract's selected tasks need and build their cubins, once per contract;
        None when ready, else `ERROR: ...` lines for every one of its items."""
        key = str(run.path)
        if key not in self.prepared:
            runnable = [t for t in tasks if gpu_skip_reason(run, t) is None]
            try:
                run.session.ready_for(runnable, path=run.worker_path())  # no output: nothing to say
                self.prepared[key], self.built[key] = None, (run.session.builds, run.session.ready.sm)
            except KContractError as error:
                self.prepared[key] = "\n".join(f"ERROR: {line}" for line in error.lines())
        return self.prepared[key]

    def run(self, task: Task, contract_path: str, loaded, key: str | None = None) -> Outcome:
        """Run one task of `loaded` with the contract path workers resolve (its kernel from the Builds `prepare`
        made for the contract at `key`); Ctrl-C ends the worker and goes on up."""
        builds, sm = self.built.get(key) or (Builds.of(loaded, jobs=usable_cores()), None)
        job = jobs_for(loaded, [dataclasses.replace(task, contract_path=contract_path)], builds, sm)[0]
        if in_process():
            return execute(job)
        box: dict[str, object] = {}

        def drive() -> None:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # the worker inherits it
            try:
                box["outcome"] = self.pool.run(job, lambda progress: None)
            except BaseException as error:  # noqa: BLE001 - re-raised in the calling thread
                box["error"] = error

        thread = threading.Thread(target=drive, name="kcontract-task", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                thread.join(0.2)
        except KeyboardInterrupt:
            self.workers.stop()
            raise
        if "error" in box:
            raise box["error"]
        outcome = box.get("outcome")
        return outcome if outcome is not None else Outcome(task, status="interrupted", detail="the run was stopped")

    def close(self) -> None:
        """Let the worker exit, and end any still running."""
        self.pool.close()
        self.workers.stop()
