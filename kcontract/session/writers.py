"""The files a run writes, each a listener that hears the run's result: the JSON report, JUnit XML and the receipt
of a whole run or a shard. `--stale` writes no receipt here: refreshing its rows is the run's end (its SUMMARY is
the whole receipt's), so the session writes them."""

from __future__ import annotations

from kcontract.receipts.currency import needs_gpu
from kcontract.receipts.receipt import Receipt, ReceiptError
from kcontract.receipts.write import run_receipt
from kcontract.report.json_report import write_json
from kcontract.report.junit import junit_document, write_junit
from kcontract.session.listeners import RunListener
from kcontract.session.options import RunOptions
from kcontract.session.run_result import RunResult


def writers(session, options: RunOptions) -> list[RunListener]:
    """The writers the options ask for: `--json`, `--junit`, and `--receipt` (but with `--stale`)."""
    found: list[RunListener] = []
    if options.json:
        found.append(JsonWriter(options.json))
    if options.junit:
        found.append(JunitWriter(options.junit))
    if options.receipt and not options.stale:
        found.append(ReceiptWriter(session, options))
    return found


class JsonWriter(RunListener):
    """`--json`: the run's document."""

    def __init__(self, path: str):
        self.path = path

    def on_result(self, result: RunResult) -> None:
        write_json(self.path, result.document)


class JunitWriter(RunListener):
    """`--junit`: a test case per entry x gate and per control."""

    def __init__(self, path: str):
        self.path = path

    def on_result(self, result: RunResult) -> None:
        write_junit(self.path, junit_document(result.entries, result.controls, result.planted, result.summary))


class ReceiptWriter(RunListener):
    """`--receipt`: the receipt of a whole run or a shard's, over what the receipt already there carries (its
    mutation scores, coverage and bench rows, where the kernel is unchanged)."""

    def __init__(self, session, options: RunOptions):
        self.session, self.options = session, options

    def on_result(self, result: RunResult) -> None:
        self.receipt(result).write(self.options.receipt)

    def receipt(self, result: RunResult) -> Receipt:
        """The receipt of the run's result."""
        loaded, options, seed = self.session.loaded, self.options, self.options.selection.seed
        return run_receipt(loaded, result.document, _previous(options.receipt),
                           mode=f"shard {options.shard}" if options.shard else "whole",
                           seed=loaded.seed if seed is None else seed, wall_s=self.session.seconds(),
                           gpu=needs_gpu(loaded), keep_rows=False, notes=result.summary.notes,
                           covers=result.plan.covers)


def _previous(path: str) -> Receipt | None:
    """The receipt already at `path`, or None."""
    try:
        return Receipt.read(path)
    except ReceiptError:
        return None
