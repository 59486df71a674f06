"""A review's contract part: the head's rows that are not current against the base's receipt (the newest whole
receipt beside the contract at the base commit, read through `Receipt`) re-run with `--stale` on a copy of it, so
the copy becomes the head's receipt (kept where the review was asked to write it); the base's receipt is left as it
is."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterable

from kcontract.receipts.durations import newest_whole_receipt
from kcontract.receipts.receipt import Receipt
from kcontract.review.contract import ContractPart, contract_part
from kcontract.session.listeners import RunListener
from kcontract.session.options import RunOptions


def contract_run(session, base_contract: Path, listeners: Iterable[RunListener], jobs: int | str,
                 keep: str | None = None) -> ContractPart:
    """Re-run the head's stale rows against the base's receipt; the head's receipt and SUMMARY beside the base's;
    `keep`: where the head's receipt is written too."""
    base, name = newest_whole_receipt(str(base_contract))
    with tempfile.TemporaryDirectory(prefix="kcontract-review-") as folder:
        copy = Path(folder) / Path(name or f"{base_contract.stem}-review.json").name
        if base is not None:
            base.write(copy)
        result = session.run(RunOptions(receipt=str(copy), stale=True, jobs=jobs), listeners)
        if result.line is None:
            raise KeyboardInterrupt
        written = copy.is_file()
        head = Receipt.read(copy) if written else Receipt()
    if keep and written:
        head.write(keep)
    refresh = result.plan.refresh
    return contract_part(head, base, name, refresh.line(), list(refresh.rerun))
