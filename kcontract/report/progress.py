"""Progress while a run goes: a bar that moves per case and gate in a terminal, a line per gate otherwise."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kcontract.report.lines import gate_line, status_line, who
from kcontract.verdict.outcome import Outcome
from kcontract.verdict.outcome import Progress as Step


class RunProgress:
    """Reports each finished case and gate; `units` counts, per Task.key, every (gate, case) the task will do. A
    task's reports move the bar up to its count, and its end moves the bar the rest of its count (a control stops
    at its first red call, a crashed task reports no more), so the bar ends at its total."""

    def __init__(self, console: Console, units: dict[tuple, int]):
        self.console = console
        self.interactive = console.is_terminal
        self.bar: Progress | None = None
        self.left = dict(units)  # units each task has yet to report
        self.units = max(sum(units.values()), 1)
        self.finished = 0  # tasks ended

    def __enter__(self) -> RunProgress:
        if self.interactive:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=self.console, transient=True)
            self.bar.start()
            self.bar_id = self.bar.add_task("kcontract run", total=self.units)
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def step(self, step: Step) -> None:
        """A case finished (advance the bar) or a gate finished (print its line)."""
        if step.result is None:
            self._advance(step.task.key, 1, f"{who(step.task)} gate {step.gate} {step.case}")
            return
        self._print(gate_line(step.task, step.result))

    def done(self, outcome: Outcome) -> None:
        """A task ended (the bar takes the rest of its units); one that did not run to the end gets its line."""
        self.finished += 1
        self._advance(outcome.task.key, self.left.get(outcome.task.key, 0), f"{who(outcome.task)} ended")
        if outcome.status != "ran":
            self._print(status_line(outcome))

    def _advance(self, key: tuple, units: int, description: str) -> None:
        """Move the bar by `units` of the task's, never past the units it has left."""
        moved = min(units, self.left.get(key, 0))
        self.left[key] = self.left.get(key, 0) - moved
        if self.bar is not None:
            self.bar.update(self.bar_id, advance=moved, description=description)

    def _print(self, line: str) -> None:
        target = self.bar.console if self.bar is not None else self.console
        target.print(line, markup=False, highlight=False)
