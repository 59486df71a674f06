"""The contract part of a review, read from receipts: the head's SUMMARY beside the base's, the rows the review
re-ran, exactness summed from rows (the realistic range gate's decided outputs bit-equal and outputs within range)
and the records gate's rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcontract.gatetable import exactness_gate, records_gate
from kcontract.receipts.receipt import Receipt
from kcontract.verdict.summary import plural


@dataclass
class Exactness:
    """Outputs checked, decided, bit-equal where decided, and within their range, summed over rows."""

    rows: int = 0
    checked: int = 0
    decided: int = 0
    bit_equal: int = 0
    within: int = 0

    def line(self) -> str:
        """`4,848,501 outputs bit-equal ... and 14,566,539 within their range (12 rows)`."""
        rows = plural(self.rows, "row")
        return (f"{self.bit_equal:,} of {self.decided:,} decided outputs bit-equal to float64's value at the rounding "
                f"points and {self.within:,} within their range, of {self.checked:,} checked ({rows})")


@dataclass
class Records:
    """The records gate over a receipt's entry rows: those that passed and failed, and the receipt's counts."""

    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    limit_problems: int | None = None


@dataclass
class ContractPart:
    """The head's receipt (the base's refreshed by the review's `--stale` run) against the base's."""

    head_summary: str
    head_exit: int
    base_summary: str | None  # None: no receipt at the base
    base_receipt: str | None  # receipts/NAME at the base
    plan: str  # the `--stale` line: what re-ran and why
    reran: list[str]  # rows the review ran, as `name` or `control name`
    exactness_run: Exactness
    exactness_head: Exactness
    exactness_base: Exactness | None
    records_head: Records
    records_base: Records | None

    @property
    def fails(self) -> bool:
        """The head's SUMMARY fails (a row red)."""
        return self.head_exit != 0


def _gate_sums(rows: list[dict], number: int) -> Exactness:
    """Exactness of one gate over entry rows."""
    sums = Exactness()
    for row in rows:
        result = (row.get("gates") or {}).get(str(number))
        if not isinstance(result, dict):
            continue
        sums.rows += 1
        sums.checked += int(result.get("checked") or 0)
        sums.decided += int(result.get("decided") or 0)
        sums.bit_equal += int(result.get("bit_equal") or 0)
        sums.within += int(result.get("within") or 0)
    return sums


def exactness(receipt: Receipt, names: set[str] | None = None) -> Exactness:
    """The realistic range gate's counts summed over a receipt's entry rows (`names`: only these entries)."""
    rows = [r for r in receipt.entries if isinstance(r, dict) and (names is None or _name(r) in names)]
    return _gate_sums(rows, exactness_gate().number)


def records(receipt: Receipt) -> Records:
    """The records gate's verdict on each entry row that ran it, and the receipt's limit problems."""
    key, found = str(records_gate().number), Records()
    for row in receipt.entries:
        result = (row.get("gates") or {}).get(key) if isinstance(row, dict) else None
        if isinstance(result, dict):
            (found.passed if result.get("passed") else found.failed).append(_name(row))
    found.limit_problems = receipt.counts.get("limit_problems")
    return found


def shown(key: tuple[str, str]) -> str:
    """`name`, or `control name`."""
    kind, name = key
    return name if kind == "entry" else f"control {name}"


def contract_part(head: Receipt, base: Receipt | None, base_name: str | None, plan: str,
                  reran: list[tuple[str, str]]) -> ContractPart:
    """The contract part of a review from the head's refreshed receipt and the base's."""
    ran = {name for kind, name in reran if kind == "entry"}
    return ContractPart(head.summary or "", int(head.exit_code or 0), base.summary if base else None, base_name, plan,
                        [shown(k) for k in reran], exactness(head, ran), exactness(head),
                        exactness(base) if base else None, records(head), records(base) if base else None)


def _name(row: dict) -> str:
    task = row.get("task") if isinstance(row.get("task"), dict) else {}
    return str(task.get("name", ""))
