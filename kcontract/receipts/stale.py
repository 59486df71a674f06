"""`run --stale`: which rows of a receipt a run must refresh, and why each.

Rows that are stale, missing or failed re-run (with `--recheck`, also those judged by an earlier kcontract);
orphaned rows are dropped when the run writes the receipt; current rows, those current by machine code among
them, stay as they are. A receipt file that does not exist yet has every row missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.receipts.form import is_receipt, is_rows, is_shard, read_json
from kcontract.receipts.judge import FAILED, MISSING, ORPHANED, STALE, judge_rows
from kcontract.receipts.machine import MachineCode
from kcontract.receipts.rows import contract_keys

SHOWN_REASONS = 8  # reasons the plan's line names before "and N more"


@dataclass
class StalePlan:
    """The receipt as it was, the rows to re-run with their reasons, and how many rows the contract has."""

    previous: dict | None
    rerun: dict[tuple[str, str], str]
    total: int
    dropped: int = 0  # orphaned rows the write drops

    def select(self, tasks: list) -> list:
        """The tasks of the rows to re-run."""
        return [t for t in tasks if (t.kind, t.name) in self.rerun]

    def line(self) -> str:
        """`--stale: re-running 7 of 58 rows: kernels/rms_norm.cu changed (...): rmsnorm_h4096, ...`, rows grouped
        by why they re-run."""
        groups: dict[str, list[str]] = {}
        for (kind, name), why in self.rerun.items():
            groups.setdefault(why, []).append(name if kind == "entry" else f"control {name}")
        shown = [f"{why}: {_few(names)}" for why, names in list(groups.items())[:SHOWN_REASONS]]
        more = len(groups) - SHOWN_REASONS
        text = f"--stale: re-running {len(self.rerun)} of {self.total} rows"
        text += ("; ".join([": " + shown[0], *shown[1:]]) + (f"; and {more} more reasons" if more > 0 else "")) \
            if shown else ": every row is current"
        return text + (f"; dropping {self.dropped} orphaned rows" if self.dropped else "")


def _few(names: list[str]) -> str:
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def plan_stale(loaded, receipt_path: str, recheck: bool) -> StalePlan:
    """The rows of the receipt at `receipt_path` that a `--stale` run refreshes."""
    data = read_json(receipt_path)
    wanted = contract_keys(loaded)
    if data is None:
        return StalePlan(None, {key: "missing" for key in wanted}, len(wanted))
    contract = Path(loaded.path).name
    if not is_receipt(data):
        raise UsageError(f"--receipt {receipt_path}: not a kcontract receipt: give the receipt to refresh, or a new "
                         f"file name")
    if not is_rows(data):
        raise UsageError(f"--receipt {receipt_path}: a receipt of the earlier whole-contract form: turn it into rows "
                         f"with `kcontract receipt upgrade {receipt_path}` first")
    if is_shard(data):
        raise UsageError(f"--receipt {receipt_path}: one shard's receipt: --stale refreshes a receipt of the whole "
                         f"contract (merge the shards first)")
    if data.get("contract") != contract:
        raise UsageError(f"--receipt {receipt_path}: a receipt of {data.get('contract')}, not of {contract}")
    with MachineCode(loaded) as machine:
        judged = judge_rows(loaded, data, machine)
    rerun = {}
    for j in judged:
        if j.state in (STALE, FAILED):
            rerun[j.key] = f"{j.state}: {j.cause}"
        elif j.state == MISSING:
            rerun[j.key] = MISSING
        elif recheck and j.earlier and j.state != ORPHANED:
            rerun[j.key] = f"judged by an earlier kcontract: {j.earlier}"
    order = {key: i for i, key in enumerate(wanted)}
    rerun = dict(sorted(rerun.items(), key=lambda item: order[item[0]]))
    return StalePlan(data, rerun, len(wanted), sum(j.state == ORPHANED for j in judged))
