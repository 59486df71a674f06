"""The receipt file: where it lives, what kind of file it is, and its rows by key.

A receipt (`receipts/<contract>-<device>.json`, JSON, `"kind": "kcontract-run"`, `"format": 2`) holds a row per
entry (`entries`) and per control (`controls`) of its contract. A row is the outcome of that entry's or control's
run (`task`, `status`, `gates`, `seconds`, `kernel`) with what it depended on (`depends`: its node's digest, the
seed, its files' sha256), the checker that judged it (`checker`) and where and how it ran (`ran`: the run's id,
commit, device, GPU, SM, toolchain). Beside the rows: the runs that wrote them (`runs`), the SUMMARY recomputed
from the rows, bench rows and mutation scores keyed by kernel source. A receipt without `format` is the earlier
whole-contract form; `kcontract receipt upgrade` turns it into rows.
"""

from __future__ import annotations

import json
from pathlib import Path

from kcontract.errors import UsageError

RECEIPTS_DIR = "receipts"
KIND = "kcontract-run"
FORMAT = 2
KINDS = ("entry", "control")
LISTS = {"entry": "entries", "control": "controls"}


def receipt_name(contract: Path, device: str) -> str:
    """`receipts/contract-h200.json`: what the receipt covers and where it ran."""
    return f"{RECEIPTS_DIR}/{contract.stem}-{device}.json"


def is_receipt(data) -> bool:
    """Whether parsed JSON is a kcontract receipt of any form."""
    return isinstance(data, dict) and data.get("kind") == KIND


def is_rows(data) -> bool:
    """Whether a receipt has rows (this form), rather than the earlier whole-contract form."""
    return is_receipt(data) and data.get("format") == FORMAT


def is_shard(data) -> bool:
    """Whether a receipt covers one shard of its contract."""
    return bool((data.get("covers") or {}).get("shard"))


def row_key(row: dict) -> tuple[str, str]:
    """("entry" | "control", name) of a row."""
    task = row.get("task") if isinstance(row.get("task"), dict) else {}
    return str(task.get("kind", "")), str(task.get("name", ""))


def rows_of(data: dict) -> dict[tuple[str, str], dict]:
    """A receipt's rows by key, entries first, in file order."""
    return {row_key(row): row for kind in KINDS for row in _list(data.get(LISTS[kind])) if isinstance(row, dict)}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def read_json(path: str | Path) -> dict | None:
    """A receipt file's JSON, or None where there is no such file; a usage error where it cannot be read or
    parsed."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UsageError(f"{path}: cannot read it ({error.strerror})") from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise UsageError(f"{path}: not valid JSON ({error}): give a receipt `kcontract run --receipt` wrote") from None
