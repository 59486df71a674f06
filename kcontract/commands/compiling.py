"""Compiles as they go, on stderr: a line per batch (a unit's compiles for its SMs), or a bar in a terminal."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kcontract.toolchain.build import Batch


class CompileProgress:
    """Hears each batch of a build (`Builds`' progress): the first says how many compiles come; each later one
    prints a line, or moves the bar where the console is a terminal."""

    def __init__(self, console: Console):
        self.console = console
        self.bar: Progress | None = None
        self.began = time.monotonic()

    def __call__(self, batch: Batch) -> None:
        if batch.done == 0:
            self._start(batch.total)
            return
        if self.bar is not None:
            self.bar.update(self.bar_id, completed=batch.done, description=f"compiled {batch.shown}")
        else:
            self.console.print(f"compile: {batch.shown} for {batch.sms} SMs ({batch.done} of {batch.total}, "
                               f"{time.monotonic() - self.began:.0f} s)", markup=False)
        if batch.done == batch.total:
            self._stop()

    def _start(self, total: int) -> None:
        """A build of `total` compiles begins: a bar in a terminal, else a line saying how many."""
        self._stop()
        self.began = time.monotonic()
        if self.console.is_terminal:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=self.console, transient=True)
            self.bar.start()
            self.bar_id = self.bar.add_task("compiling", total=total)
        else:
            self.console.print(f"compile: {total} modules to compile", markup=False)

    def _stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
