"""`Receipt`, the one door to a receipt file: committed receipts read and written again are the same bytes, every
file that is no receipt this kcontract reads is one line naming why, fields read as their types, and a write holds
the receipt's lock."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.receipts.receipt import NewerReceipt, NotAReceipt, Receipt, ReceiptMissing, ReceiptUnreadable
from kcontract.receipts.schema import FORMAT, KIND, lock_of

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = [ROOT / "receipts" / "contract-h200.json", *sorted((ROOT / "examples").glob("*/receipts/contract-*.json"))]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_receipt_read_and_written_again_is_the_same_file(path, tmp_path):
    receipt = Receipt.read(path)
    assert receipt.has_rows and receipt.rows()
    receipt.write(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("text, kind, reason", [
    (None, ReceiptMissing, "no such file"),
    ('{"entries": 3', ReceiptUnreadable, "not valid JSON (Expecting ',' delimiter"),
    ("[1, 2]", NotAReceipt, 'not a kcontract receipt (no "kind": "kcontract-run")'),
    ('{"kind": "kcontract drift"}', NotAReceipt, 'not a kcontract receipt (no "kind": "kcontract-run")'),
    (json.dumps({"kind": KIND, "format": FORMAT + 1}), NewerReceipt,
     f"a receipt of format {FORMAT + 1}, newer than this kcontract's format {FORMAT}"),
])
def test_a_file_that_is_no_receipt_this_kcontract_reads_is_one_line_naming_why(tmp_path, text, kind, reason):
    path = tmp_path / "r.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(kind) as caught:
        Receipt.read(path)
    assert caught.value.message.startswith(f"{path}: {reason}") and "\n" not in caught.value.message


def test_receipt_show_refuses_a_file_that_is_no_receipt_in_one_line(tmp_path):
    path = tmp_path / "drift.json"
    path.write_text(json.dumps({"kind": "kcontract drift", "git": {"commit": "abc"}}))
    done = CliRunner().invoke(cli, ["receipt", "show", "--contract", str(ROOT / "contract.yaml"), str(path)])
    assert done.exit_code == 2 and done.output.splitlines() == [
        f"ERROR: {path}: not a kcontract receipt (no \"kind\": \"kcontract-run\"); give a receipt `kcontract run "
        f"--receipt` wrote"]


def test_a_damaged_field_reads_as_its_empty_value_and_is_named_as_lacking():
    receipt = Receipt({"kind": KIND, "format": FORMAT, "entries": {"not": "a list"}, "bench": "x", "mutation": None,
                       "controls": [], "covers": {"shard": "1/2"}})
    assert (receipt.entries, receipt.bench, receipt.mutation, receipt.runs) == ([], [], {}, [])
    assert receipt.lacks("entries", "controls", "counts") == ["entries", "counts"]
    assert receipt.is_shard and receipt.shard == "1/2" and receipt.commit is None


def test_an_update_holds_the_receipts_lock_and_keeps_what_it_did_not_put(tmp_path):
    path = tmp_path / "receipts" / "r.json"
    Receipt({"kind": KIND, "format": FORMAT, "mutation": {"a": {"score_pct": 1.0}}, "other": [1]}).write(path)
    with Receipt.updating(path) as receipt:
        with open(lock_of(path), "w") as lock, pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer waits while this one holds it
        receipt.put_mutation({"b": {"score_pct": 2.0}})
    assert json.loads(path.read_text()) == {"kind": KIND, "format": FORMAT, "other": [1],
                                            "mutation": {"a": {"score_pct": 1.0}, "b": {"score_pct": 2.0}}}
    with open(lock_of(path), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released once the update is written


def test_an_update_that_fails_writes_nothing(tmp_path):
    path = tmp_path / "r.json"
    Receipt({"kind": KIND, "format": FORMAT}).write(path)
    before = path.read_bytes()
    with pytest.raises(ValueError), Receipt.updating(path) as receipt:
        receipt.put_coverage({"e": {"lines": {}}})
        raise ValueError("a score that cannot be judged")
    assert path.read_bytes() == before
