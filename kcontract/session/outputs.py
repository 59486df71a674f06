"""What the measuring commands (bench, mutate, coverage) write into a receipt that `kcontract run` wrote."""

from __future__ import annotations

import json
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.provenance import git_state


def require_receipt(path: str | None) -> None:
    """Refuse, before any work, a `--receipt` that names no file."""
    if path and not Path(path).is_file():
        raise UsageError(f"--receipt {path}: no such receipt; write it with `kcontract run --receipt`")


def measured_at(loaded) -> str:
    """The commit of the contract's checkout, as measurements kept in a receipt are marked."""
    return git_state(Path(loaded.path).resolve().parent)["commit"]


def read_receipt(path: str | Path) -> dict:
    """The receipt's JSON."""
    return json.loads(Path(path).read_text())


def write_receipt(path: str | Path, receipt: dict) -> None:
    """The receipt's JSON, as `kcontract run` writes it."""
    Path(path).write_text(json.dumps(receipt, indent=1, sort_keys=True) + "\n")
