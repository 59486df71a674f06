"""A run listener that keeps what it hears, in order."""

from __future__ import annotations

from kcontract.session.listeners import RunListener


class Heard(RunListener):
    """Every event's name in order, the notes, the units at the start, the finished tasks and the result."""

    def __init__(self):
        self.events: list[str] = []
        self.notes: list[str] = []
        self.done: list = []
        self.units: dict | None = None
        self.result = None

    def on_note(self, line: str) -> None:
        self.events.append("note")
        self.notes.append(line)

    def on_start(self, units: dict[tuple, int]) -> None:
        self.events.append("start")
        self.units = units

    def on_step(self, step) -> None:
        if self.events[-1] != "step":
            self.events.append("step")

    def on_task_done(self, outcome) -> None:
        self.events.append("done")
        self.done.append(outcome)

    def on_stop(self) -> None:
        self.events.append("stop")

    def on_result(self, result) -> None:
        self.events.append("result")
        self.result = result
