"""Worker processes (spawn) with a per-task timeout: a crash or hang is reported and the run goes on."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import threading
import time
from multiprocessing.connection import Connection
from typing import Callable

from kcontract.runner.outcome import Outcome, Task


def _serve(conn: Connection) -> None:
    """Worker loop: execute tasks until the pipe closes."""
    from kcontract.runner.execute import execute

    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        conn.send(execute(task))


class Worker:
    """One spawned worker process, reused until it faults."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()

    def run(self, task: Task) -> Outcome:
        """Send a task and wait up to its timeout; kill the worker if it hangs or dies."""
        start = time.perf_counter()
        try:
            self.conn.send(task)
            if self.conn.poll(task.timeout):
                return self.conn.recv()
            self.kill()
            return Outcome(task, status="timed out", detail=f"no answer within {task.timeout:g} s; worker killed",
                           seconds=time.perf_counter() - start)
        except (EOFError, BrokenPipeError, ConnectionResetError):
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
        import signal

        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


class Pool:
    """Runs tasks one at a time in a worker, replacing the worker after a crash or timeout."""

    def __init__(self) -> None:
        self.worker: Worker | None = None

    def run(self, task: Task) -> Outcome:
        """Run one task in a healthy worker."""
        if self.worker is None or not self.worker.alive:
            self.worker = Worker()
        outcome = self.worker.run(task)
        if outcome.status in ("crashed", "timed out"):
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


def run_in_workers(tasks: list[Task], jobs: int, done: Callable[[Task], None]) -> list[Outcome]:
    """Run tasks on `jobs` workers side by side; outcomes come back in task order."""
    todo: queue.Queue = queue.Queue()
    for index, task in enumerate(tasks):
        todo.put((index, task))
    outcomes: list[Outcome | None] = [None] * len(tasks)
    lock = threading.Lock()

    def drive() -> None:
        pool = Pool()
        try:
            while True:
                try:
                    index, task = todo.get_nowait()
                except queue.Empty:
                    return
                outcomes[index] = pool.run(task)
                with lock:
                    done(task)
        finally:
            pool.close()

    threads = [threading.Thread(target=drive, daemon=True) for _ in range(min(jobs, max(1, len(tasks))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes
