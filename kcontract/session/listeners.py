"""What hears a run as it goes (`Session.run`'s listeners): every event does nothing unless a listener overrides it,
so each listener takes only what it is for. Front doors build them: progress, tables, failures, GitHub's
annotations and step summary, and the writers of the JSON, JUnit and the receipt (session/writers.py)."""

from __future__ import annotations

from typing import Iterable

from kcontract.session.run_result import RunResult
from kcontract.verdict.outcome import Outcome, Progress


class RunListener:
    """One listener of a run; the events come in this order: notes at any time, then `on_start`, steps and done
    tasks, `on_stop`, then `on_result` unless the run was cut short."""

    def on_note(self, line: str) -> None:
        """A line to say as it happens (stderr): the plan's notes, what the machine check found, what was built."""

    def on_start(self, units: dict[tuple, int]) -> None:
        """The tasks begin; `units`: the progress units of each task, by Task.key."""

    def on_step(self, step: Progress) -> None:
        """A case or a gate of a task finished."""

    def on_task_done(self, outcome: Outcome) -> None:
        """A task ended."""

    def on_stop(self) -> None:
        """The tasks stopped: all done, cut short or failed (heard after every `on_start`)."""

    def on_result(self, result: RunResult) -> None:
        """Every task ran to its end: what the run found, with its JSON document (not heard when cut short)."""


class Listeners(RunListener):
    """Every listener given hears each event, in the order given."""

    def __init__(self, listeners: Iterable[RunListener]):
        self.listeners = list(listeners)

    def notes(self, lines: list[str]) -> None:
        """Each line as a note."""
        for line in lines:
            self.on_note(line)

    def on_note(self, line: str) -> None:
        self._each("on_note", line)

    def on_start(self, units: dict[tuple, int]) -> None:
        self._each("on_start", units)

    def on_step(self, step: Progress) -> None:
        self._each("on_step", step)

    def on_task_done(self, outcome: Outcome) -> None:
        self._each("on_task_done", outcome)

    def on_stop(self) -> None:
        self._each("on_stop")

    def on_result(self, result: RunResult) -> None:
        self._each("on_result", result)

    def _each(self, event: str, *args) -> None:
        for listener in self.listeners:
            getattr(listener, event)(*args)
