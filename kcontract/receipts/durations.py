"""How long each task took when a receipt's rows last ran: the pool starts the longest first."""

from __future__ import annotations

from kcontract.receipts.form import is_rows

Key = tuple[str, str, int]  # (task kind, entry or control name, gate)


def last_durations(receipt: dict | None, device: str) -> dict[Key, float]:
    """Seconds per (kind, name, gate) from the receipt's rows that ran on `device` ("gpu" or "cpu")."""
    if not is_rows(receipt):
        return {}
    found: dict[Key, float] = {}
    for row in list(receipt.get("entries", [])) + list(receipt.get("controls", [])):
        task, ran = row.get("task") or {}, row.get("ran") or {}
        if ran.get("device") != device or not isinstance(row.get("gates"), dict):
            continue
        for number, result in row["gates"].items():
            seconds = result.get("seconds") if isinstance(result, dict) else None
            if isinstance(seconds, (int, float)) and str(number).isdigit():
                found[(task.get("kind", ""), task.get("name", ""), int(number))] = float(seconds)
    return found
