"""Compiles as they go, on stderr: a line per batch (a unit's compiles for its SMs) and one at least every
HEARTBEAT seconds while a batch is long, or a bar in a terminal."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kcontract.toolchain.build import Batch
from kcontract.verdict.summary import plural

HEARTBEAT = 15.0  # seconds between lines, at most, while compiles go on


class CompileProgress:
    """Hears each compile of a build (`Builds`' progress): the first report says how many come; then a line per
    unit done (and one every HEARTBEAT seconds between), or the bar moves where the console is a terminal."""

    def __init__(self, console: Console):
        self.console = console
        self.bar: Progress | None = None
        self.began = self.said = time.monotonic()

    def __call__(self, batch: Batch) -> None:
        if batch.done == 0:
            self._start(batch.total)
            return
        now = time.monotonic()
        if self.bar is not None:
            self.bar.update(self.bar_id, completed=batch.done, description=f"compiling {batch.shown}")
        elif batch.whole or now - self.said >= HEARTBEAT:
            what = f"for {plural(batch.of, 'SM')}" if batch.whole else f"{batch.sms} of {batch.of} SMs so far"
            self.console.print(f"compile: {batch.shown} {what} ({batch.done} of {batch.total} compiles, "
                               f"{now - self.began:.0f} s)", markup=False)
            self.said = now
        if batch.done == batch.total:
            self._stop()

    def _start(self, total: int) -> None:
        """A build of `total` compiles begins: a bar in a terminal, else a line saying how many."""
        self._stop()
        self.began = self.said = time.monotonic()
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
