"""What the measuring commands (bench, mutate, coverage) need of a receipt that `kcontract run` wrote: that it is
one, and the commit their measurements are marked with."""

from __future__ import annotations

from pathlib import Path

from kcontract.errors import UsageError
from kcontract.provenance import git_state
from kcontract.receipts.receipt import Receipt, ReceiptMissing


def require_receipt(path: str | None) -> None:
    """Refuse, before any work, a `--receipt` that names no file or no receipt this kcontract reads."""
    if not path:
        return
    try:
        Receipt.read(path)
    except ReceiptMissing:
        raise UsageError(f"--receipt {path}: no such receipt; write it with `kcontract run --receipt`") from None


def measured_at(loaded) -> str:
    """The commit of the contract's checkout, as measurements kept in a receipt are marked."""
    return git_state(Path(loaded.path).resolve().parent)["commit"]
