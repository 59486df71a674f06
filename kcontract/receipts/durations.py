"""How long each row's tasks took in the newest receipt of the whole contract beside it: shards are balanced by
it, and the pool starts the longest tasks first."""

from __future__ import annotations

import json
from pathlib import Path

from kcontract.receipts.form import KIND, RECEIPTS_DIR

GateKey = tuple[str, str, int]  # (task kind, entry or control name, gate)


def newest_whole_receipt(contract_path: str) -> tuple[dict | None, str | None]:
    """The newest receipt of the whole contract under its folder's receipts/ (by its `created` stamp, then file
    name), and its path as receipts/NAME; (None, None) when there is none."""
    base = Path(contract_path).resolve().parent
    contract = Path(contract_path).resolve().relative_to(base).as_posix()
    found = []
    for path in sorted((base / RECEIPTS_DIR).glob(f"{Path(contract_path).stem}-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (isinstance(data, dict) and data.get("kind") == KIND and data.get("contract") == contract
                and not (data.get("covers") or {}).get("shard")):
            found.append((str(data.get("created", "")), path.name, data))
    if not found:
        return None, None
    _, name, data = max(found, key=lambda f: (f[0], f[1]))
    return data, f"{RECEIPTS_DIR}/{name}"


def _rows(receipt: dict | None):
    """(kind, row) of every entry and control row of a receipt."""
    for kind, key in (("entry", "entries"), ("control", "controls")):
        for row in (receipt or {}).get(key) or []:
            if isinstance(row, dict) and isinstance(row.get("task"), dict):
                yield kind, row


def row_seconds(receipt: dict | None) -> dict[tuple[str, str], float]:
    """Seconds per (kind, name): each row's whole time."""
    seconds = {}
    for kind, row in _rows(receipt):
        try:
            seconds[(kind, row["task"]["name"])] = float(row["seconds"])
        except (KeyError, TypeError, ValueError):
            continue
    return seconds


def gate_seconds(receipt: dict | None, device: str) -> dict[GateKey, float]:
    """Seconds per (kind, name, gate) of the rows that ran on `device` ("gpu" or "cpu")."""
    found: dict[GateKey, float] = {}
    for kind, row in _rows(receipt):
        if (row.get("ran") or {}).get("device") != device or not isinstance(row.get("gates"), dict):
            continue
        for number, result in row["gates"].items():
            seconds = result.get("seconds") if isinstance(result, dict) else None
            if isinstance(seconds, (int, float)) and str(number).isdigit():
                found[(kind, row["task"].get("name", ""), int(number))] = float(seconds)
    return found
