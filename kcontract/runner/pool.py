"""Worker processes (spawn) with a per-task timeout: a crash or hang is reported and the run goes on.

Workers ignore Ctrl-C and SIGTERM (SIGINT stays blocked from their start until they ignore it); the parent
ends every worker it started when it is interrupted, so no worker outlives it, and a worker whose parent is
gone exits quietly at its next message.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Callable

from kcontract.capacity import usable_cores
from kcontract.runner.budget import DeviceBudget

from kcontract.runner.order import start_order
from kcontract.runner.job import Job
from kcontract.verdict.outcome import Outcome, Progress, Span


def _serve(conn: Connection) -> None:
    """Worker loop: execute jobs until the pipe closes, sending progress and then the outcome."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    from kcontract.runner.execute import execute

    try:
        while True:
            job = conn.recv()
            outcome = execute(job, lambda progress: conn.send(progress), fresh=True)
            conn.send(outcome)
            if outcome.fatal:  # a lost GPU context: no teardown, whose destructors would only report the loss again
                conn.close()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
    except (EOFError, BrokenPipeError, ConnectionResetError):  # the parent is gone: nobody to report to
        os._exit(0)


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """While a worker is spawned, its BLAS threads (unless the user set them): workers side by side share the
    cores instead of each spinning a thread per core."""
    given = [name for name in BLAS_THREADS if name not in os.environ] if threads else []
    os.environ.update({name: str(threads) for name in given})
    try:
        yield
    finally:
        for name in given:
            os.environ.pop(name, None)


class Worker:
    """One spawned worker process, reused until it faults."""

    def __init__(self, threads: int | None = None) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        with blas_threads(threads):
            self.proc.start()
        child.close()

    def run(self, job: Job, on_progress: Callable[[Progress], None]) -> Outcome:
        """Send a job and wait up to its task's timeout; kill the worker if it hangs or dies."""
        task = job.task
        start = time.perf_counter()
        deadline = start + task.timeout
        try:
            self.conn.send(job)
            while True:
                left = deadline - time.perf_counter()
                if left <= 0 or not self.conn.poll(left):
                    self.kill()
                    return Outcome(task, status="timed out",
                                   detail=f"no answer within {task.timeout:g} s (the timeout of each gate); "
                                          f"worker killed", seconds=time.perf_counter() - start)
                message = self.conn.recv()
                if isinstance(message, Outcome):
                    return message
                on_progress(message)
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            self.proc.join(timeout=5)
            return Outcome(task, status="crashed", detail=f"worker died ({describe_exit(self.proc.exitcode)})",
                           seconds=time.perf_counter() - start)

    @property
    def alive(self) -> bool:
        """Whether the worker can take another task."""
        return self.proc.is_alive()

    def kill(self) -> None:
        """End the worker now."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)

    def close(self) -> None:
        """Let the worker finish and exit."""
        self.conn.close()
        self.proc.join(timeout=5)
        self.kill()


def describe_exit(code: int | None) -> str:
    """'signal SIGABRT' or 'exit code 3'."""
    if code is None:
        return "still running"
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


class Workers:
    """Every worker a run started, so an interrupt can end them all; starts none once stopped. `threads`: the BLAS
    threads of each (None: the libraries' own choice)."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self.lock = threading.Lock()
        self.started: list[Worker] = []
        self.stopped = threading.Event()

    def start(self) -> Worker | None:
        """A new worker, or None once the run is stopping."""
        with self.lock:
            if self.stopped.is_set():
                return None
            worker = Worker(self.threads)
            self.started.append(worker)
            return worker

    def stop(self) -> None:
        """Start no more workers and kill every one still running."""
        self.stopped.set()
        with self.lock:
            for worker in self.started:
                worker.kill()


class Pool:
    """Runs tasks one at a time in a worker, replacing the worker after a crash, a timeout or a fatal fault."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.worker: Worker | None = None

    def run(self, job: Job, on_progress: Callable[[Progress], None]) -> Outcome | None:
        """Run one job in a healthy worker; None when the run is stopping."""
        if self.worker is None or not self.worker.alive:
            self.worker = self.workers.start()
            if self.worker is None:
                return None
        outcome = self.worker.run(job, on_progress)
        if outcome.status in ("crashed", "timed out") or outcome.fatal:
            self.worker.kill()
            self.worker = None
        return outcome

    def close(self) -> None:
        """Stop the worker."""
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def in_process() -> bool:
    """KCONTRACT_IN_PROCESS=1 runs tasks without workers (debugging)."""
    return os.environ.get("KCONTRACT_IN_PROCESS") == "1"


def run_in_workers(work: list[Job], jobs: int, on_progress: Callable[[Progress], None],
                   on_done: Callable[[Outcome], None], budget: DeviceBudget | None = None,
                   durations: dict | None = None) -> list[Outcome]:
    """Run jobs on `jobs` workers side by side, each started once its device bytes fit the budget; outcomes come
    back in job order, started longest first by `durations` (start_order). Ctrl-C ends every worker."""
    budget = budget or DeviceBudget(0)
    tasks = [job.task for job in work]
    todo: queue.Queue = queue.Queue()
    for index in start_order(tasks, durations):
        todo.put((index, work[index]))
    outcomes: list[Outcome | None] = [None] * len(tasks)
    lock = threading.Lock()
    workers = Workers(threads=max(1, usable_cores() // max(1, jobs)))

    def report(progress: Progress) -> None:
        with lock:
            on_progress(progress)

    def drive(slot: int) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # children inherit the mask
        pool = Pool(workers)
        try:
            while not workers.stopped.is_set():
                try:
                    index, job = todo.get_nowait()
                except queue.Empty:
                    return
                queued = time.monotonic()
                if not budget.take(job.task.device_bytes, workers.stopped):
                    return
                started = time.monotonic()
                try:
                    outcome = pool.run(job, report)
                finally:
                    budget.give(job.task.device_bytes)
                if outcome is None or workers.stopped.is_set():
                    return  # a worker killed by the interrupt did not crash: its task is reported as interrupted
                task = job.task
                outcome.spans = [Span(list(task.gates), task.device_bytes, slot, queued, started, time.monotonic())]
                outcomes[index] = outcome
                with lock:
                    on_done(outcome)
        except Exception:  # a pipe broken by an interrupt: the main thread reports it
            if not workers.stopped.is_set():
                raise
        finally:
            pool.close()

    slots = range(min(jobs, max(1, len(tasks))))
    threads = [threading.Thread(target=drive, args=(slot,), daemon=True) for slot in slots]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        workers.stop()
        with lock:
            return [o or Outcome(t, status="interrupted", detail="the run was interrupted")
                    for o, t in zip(outcomes, tasks)]
    return outcomes
