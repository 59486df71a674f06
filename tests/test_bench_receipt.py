"""Bench rows in receipts: a new run keeps the rows of entries whose kernel source is unchanged, a bench of some
entries replaces only theirs, and the markdown names the commit earlier rows were measured at."""

from __future__ import annotations

from pathlib import Path

from kcontract.contract.loader import load_contract
from kcontract.identity import file_sha256
from kcontract.receipts.carried import carried_bench, entry_source_sha256
from kcontract.receipts.receipt import Receipt
from kcontract.report.receipt import receipt_markdown

ROOT = Path(__file__).resolve().parents[1]


def row(entry: str, us: float, **more) -> dict:
    return {"entry": entry, "call": "c", "size": {"rows": 1}, "bound": "memory", "us": us, "graph_us": us,
            "bytes": 1, "gbps": 1.0, "read_gbps": 4000.0, "ratio": 0.5, "peer_us": None, "peer": "none", **more}


def test_rows_of_unchanged_kernels_carry_over_and_benched_entries_are_replaced():
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    decode = "kernels/window_decode.cu"
    data = {"git": {"commit": "abc"}, "sources": {decode: file_sha256(ROOT / decode)},
            "bench": [row("decode_d512_g16", 1.0), row("gone_entry", 2.0),
                      row("rmsnorm_h4096", 3.0, source_sha256="0" * 64, measured_at="old")]}
    previous = Receipt(data)
    assert carried_bench(loaded, previous) == [{**row("decode_d512_g16", 1.0), "measured_at": "abc"}]
    assert carried_bench(loaded, previous, {"decode_d512_g16"}) == []
    data["sources"][decode] = "0" * 64  # the kernel changed since
    assert carried_bench(loaded, previous) == []
    named = row("rmsnorm_h4096", 3.0, source_sha256=entry_source_sha256(loaded, "rmsnorm_h4096"), measured_at="def")
    data["bench"].append(named)  # a row that names the source it timed is judged by it
    assert carried_bench(loaded, previous) == [named]
    assert entry_source_sha256(loaded, "no_such_entry") is None


def test_the_markdown_names_the_commit_of_rows_measured_earlier():
    receipt = Receipt({"git": {"commit": "1234567abc"}, "bench_ceiling": {"read_gbps": 4000.0, "copy_gbps": 3900.0},
                       "bench": [row("decode_d512_g16", 1.0, measured_at="89abcdef00"),
                                 row("rmsnorm_h4096", 2.0, measured_at="1234567abc")]})
    text = receipt_markdown(receipt)
    assert "Rows of decode_d512_g16 measured at 89abcde (kernel source unchanged since)." in text
    assert "rmsnorm_h4096 measured at" not in text


def test_a_row_that_names_its_entrys_node_leaves_when_the_node_changes():
    from kcontract.receipts.carried import measured_for

    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    named = row("matmul_logits_k4096_n16384_fp32", 3.0, measured_at="def",
                **measured_for(loaded, "matmul_logits_k4096_n16384_fp32"))
    assert carried_bench(loaded, Receipt({"bench": [named]})) == [named]
    other_split = {**named, "node_sha256": "0" * 64}  # measured while the entry declared another split
    assert carried_bench(loaded, Receipt({"bench": [other_split]})) == []
