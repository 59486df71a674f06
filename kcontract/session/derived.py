"""A contract kcontract wrote itself (mutants, coverage stand-ins): checked for the GPU, and its controls run
through the ordinary runner while a progress listener hears each finished task."""

from __future__ import annotations

from typing import Callable, ContextManager

from kcontract.session.plan import Selection, plan_tasks
from kcontract.session.prebuild import prebuild
from kcontract.session.session import Session
from kcontract.verdict.outcome import Outcome, Task

Progress = Callable[[dict[tuple, int]], ContextManager]  # units per Task.key -> a listener with .done(outcome)


class Derived:
    """The written contract, loaded (a session of its own) and checked for the GPU (only the notes of folders made
    are said)."""

    def __init__(self, contract: str, names: list[str] | None, say: Callable[[str], None]):
        """`names`: the kernels said to need the GPU (None: every entry's)."""
        self.path = contract
        self.session = Session(contract)
        self.loaded, self.builds = self.session.loaded, self.session.builds
        names = [e.name for e in self.loaded.entries] if names is None else names
        self.ready = self.session.machine(cuda=True, gpu=True, names=names, say=say, quiet=True)

    def tasks(self, controls) -> list[Task]:
        """The tasks of the named controls."""
        return plan_tasks(self.loaded, self.path, Selection(controls=tuple(controls)))

    def entry_tasks(self, entry: str) -> list[Task]:
        """The tasks of the entry itself, every gate, no control."""
        return plan_tasks(self.loaded, self.path, Selection(only=(entry,), no_controls=True))

    def build(self, tasks: list[Task]) -> str | None:
        """Every cubin the tasks load, compiled once; the line saying so, or None."""
        return prebuild(self.loaded, self.builds, tasks, self.ready.sm)

    def workers(self, jobs) -> int:
        """`--jobs`, with `auto` as many as the GPU and host hold."""
        from kcontract.session.workers import auto_jobs

        return auto_jobs(self.loaded, gpu=True)[0] if jobs == "auto" else jobs

    def run(self, tasks: list[Task], workers: int, progress: Progress) -> tuple[list[Outcome], list[Outcome]]:
        """Run the tasks on the GPU: every outcome, and those of the tasks that finished."""
        from kcontract.runner.run_tasks import run_tasks
        from kcontract.session.run_result import work_units

        finished: list[Outcome] = []
        with progress(work_units(self.loaded, tasks)) as listener:
            def done(outcome: Outcome) -> None:
                finished.append(outcome)
                listener.done(outcome)

            outcomes = run_tasks(self.loaded, tasks, workers, lambda step: None, done, gpu=True, builds=self.builds,
                                 device_sm=self.ready.sm)
        return outcomes, finished


def interrupted(outcomes: list[Outcome]) -> bool:
    """Whether the run was cut short (Ctrl-C or SIGTERM)."""
    return any(o.status == "interrupted" for o in outcomes)
