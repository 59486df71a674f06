"""`run --stale`: which rows of a receipt a run must refresh, and why each.

Rows that are stale, missing or failed re-run (with `--recheck`, also those judged by an earlier kcontract);
orphaned rows are dropped when the run writes the receipt; current rows, those current by machine code among
them, stay as they are. A receipt file that does not exist yet has every row missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.receipts.judge import FAILED, MISSING, ORPHANED, STALE, judge_rows
from kcontract.receipts.machine_code import MachineCode
from kcontract.receipts.receipt import NotAReceipt, Receipt, ReceiptMissing
from kcontract.receipts.rows import contract_keys

SHOWN_REASONS = 8  # reasons the plan's line names before "and N more"


@dataclass
class StalePlan:
    """The receipt as it was, the rows to re-run with their reasons, and how many rows the contract has."""

    previous: Receipt | None
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
    wanted = contract_keys(loaded)
    receipt = _refreshable(loaded, receipt_path)
    if receipt is None:
        return StalePlan(None, {key: MISSING for key in wanted}, len(wanted))
    with MachineCode(loaded) as machine:
        judged = judge_rows(loaded, receipt, machine, recheck)
    order = {key: i for i, key in enumerate(wanted)}
    rerun = dict(sorted(_reruns(judged, recheck).items(), key=lambda item: order[item[0]]))
    return StalePlan(receipt, rerun, len(wanted), sum(j.state == ORPHANED for j in judged))


def _refreshable(loaded, path: str) -> Receipt | None:
    """The receipt `--stale` refreshes: one of rows of the whole contract; None where there is no file yet."""
    try:
        receipt = Receipt.read(path)
    except ReceiptMissing:
        return None
    except NotAReceipt:
        raise UsageError(f"--receipt {path}: not a kcontract receipt: give the receipt to refresh, or a new file "
                         f"name") from None
    contract = Path(loaded.path).name
    if not receipt.has_rows:
        raise UsageError(f"--receipt {path}: a receipt of the earlier whole-contract form: turn it into rows with "
                         f"`kcontract receipt upgrade {path}` first")
    if receipt.is_shard:
        raise UsageError(f"--receipt {path}: one shard's receipt: --stale refreshes a receipt of the whole contract "
                         f"(merge the shards first)")
    if receipt.contract != contract:
        raise UsageError(f"--receipt {path}: a receipt of {receipt.contract}, not of {contract}")
    return receipt


def _reruns(judged: list, recheck: bool) -> dict[tuple[str, str], str]:
    """The rows to re-run, each with why: stale, failed or missing; with `recheck`, judged by an earlier
    kcontract."""
    rerun = {}
    for j in judged:
        if j.state in (STALE, FAILED):
            rerun[j.key] = f"{j.state}: {j.cause}"
        elif j.state == MISSING:
            rerun[j.key] = MISSING
        elif recheck and j.earlier and j.state != ORPHANED:
            rerun[j.key] = f"judged by an earlier kcontract: {j.earlier}"
    return rerun
