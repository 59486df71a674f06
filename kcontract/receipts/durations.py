"""How long each row's tasks took, and what device memory they held, in the newest receipt of the whole contract
beside it: shards are balanced by it, the pool starts the longest tasks first, and a task declares what it held."""

from __future__ import annotations

from pathlib import Path

from kcontract.receipts.receipt import Receipt, ReceiptError
from kcontract.receipts.rows import cold_measures
from kcontract.receipts.schema import KINDS, RECEIPTS_DIR

GateKey = tuple[str, str, int]  # (task kind, entry or control name, gate)


def newest_whole_receipt(contract_path: str) -> tuple[Receipt | None, str | None]:
    """The newest receipt of the whole contract under its folder's receipts/ (by its `created` stamp, then file
    name), and its path as receipts/NAME; (None, None) when there is none."""
    base = Path(contract_path).resolve().parent
    contract = Path(contract_path).resolve().relative_to(base).as_posix()
    found = []
    for path in sorted((base / RECEIPTS_DIR).glob(f"{Path(contract_path).stem}-*.json")):
        try:
            receipt = Receipt.read(path)
        except ReceiptError:
            continue
        if receipt.contract == contract and not receipt.is_shard:
            found.append((str(receipt.created or ""), path.name, receipt))
    if not found:
        return None, None
    _, name, receipt = max(found, key=lambda f: (f[0], f[1]))
    return receipt, f"{RECEIPTS_DIR}/{name}"


def _rows(receipt: Receipt | None):
    """(kind, row) of every entry and control row of a receipt."""
    for kind in KINDS if receipt is not None else ():
        for row in receipt.row_list(kind):
            if isinstance(row, dict) and isinstance(row.get("task"), dict):
                yield kind, row


def row_seconds(receipt: Receipt | None) -> dict[tuple[str, str], float]:
    """Seconds per (kind, name): each row's whole time."""
    seconds = {}
    for kind, row in _rows(receipt):
        try:
            seconds[(kind, row["task"]["name"])] = float(row["seconds"])
        except (KeyError, TypeError, ValueError):
            continue
    return seconds


def _gate_results(receipt: Receipt | None, device: str):
    """((kind, name, gate), result) of every gate of the rows that ran on `device` ("gpu" or "cpu")."""
    for kind, row in _rows(receipt):
        if (row.get("ran") or {}).get("device") != device or not isinstance(row.get("gates"), dict):
            continue
        for number, result in row["gates"].items():
            if isinstance(result, dict) and str(number).isdigit():
                yield (kind, row["task"].get("name", ""), int(number)), result


def _measure(result: dict, name: str, cold: bool):
    """A gate's measure `name` ("seconds" or "live_gpu_mb"): with `cold`, from the last run that computed its
    inputs and references (rows.cold_measures), else its own; None where the row has none."""
    if cold:
        value = (cold_measures(result) or {}).get(name)
    else:
        value = result.get(name) if name == "seconds" else (result.get("profile") or {}).get(name)
    return value if isinstance(value, (int, float)) and value >= 0 else None


def gate_seconds(receipt: Receipt | None, device: str, cold: bool = True) -> dict[GateKey, float]:
    """Seconds per (kind, name, gate) of the rows that ran on `device` ("gpu" or "cpu"), as a run from a cold
    cache takes them (`cold`) or as they took them last."""
    found = {key: _measure(result, "seconds", cold) for key, result in _gate_results(receipt, device)}
    return {key: float(value) for key, value in found.items() if value is not None}


def gate_live_bytes(receipt: Receipt | None, device: str, cold: bool = True) -> dict[GateKey, int]:
    """Device bytes per (kind, name, gate) that the rows that ran on `device` held at most at once, as a run from
    a cold cache holds them (`cold`) or as they held them last (their gates' `live_gpu_mb`)."""
    found = {key: _measure(result, "live_gpu_mb", cold) for key, result in _gate_results(receipt, device)}
    return {key: int(value * (1 << 20)) for key, value in found.items() if value is not None}


def gate_case_outputs(receipt: Receipt | None, device: str) -> dict[GateKey, dict[str, int]]:
    """Outputs checked per case label (a case, or a case's part: `case/order_probes`) of each gate of several
    cases, of the rows that ran on `device`: what a gate's seconds are shared out by among its cases."""
    found = {}
    for key, result in _gate_results(receipt, device):
        by_case = (result.get("facts") or {}).get("by_case")
        if isinstance(by_case, dict):
            found[key] = {label: sum(c.get("checked", 0) for c in outputs.values() if isinstance(c, dict))
                          for label, outputs in by_case.items() if isinstance(outputs, dict)}
    return found
