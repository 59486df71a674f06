"""examples/peers: torch's attention backends and a Triton decode under the decode contract; the contract loads
without torch, and its H200 receipt is current."""

from __future__ import annotations

import json
from pathlib import Path

from kcontract.contract.loader import load_contract
from tests.helpers.cli import kcontract, no_traceback

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "examples" / "peers" / "contract.yaml"
RECEIPT = ROOT / "examples" / "peers" / "receipts" / "contract-h200.json"


def test_the_peer_contract_loads_without_torch_or_triton():
    done = kcontract("list", "--contract", str(CONTRACT))
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    loaded = load_contract(str(CONTRACT))
    assert {e.name for e in loaded.entries} <= set(done.stdout.split())
    assert all(e.kernel.device for e in loaded.entries)


def test_math_is_declared_as_it_computes_and_its_h200_receipt_is_current():
    loaded = load_contract(str(CONTRACT), import_kernels=False)
    math = [e for e in loaded.entries if e.name.startswith("sdpa_math")]
    assert math and all(e.family.spec.arithmetic.normalise == "per_key" for e in math)
    done = kcontract("receipt", "check", "--contract", str(CONTRACT))
    assert done.returncode == 0, done.stdout
    receipt = json.loads(RECEIPT.read_text())
    gates = {e["task"]["name"]: e["gates"] for e in receipt["entries"]}
    assert all(gates[e.name]["4"]["passed"] and gates[e.name]["1"]["passed"] for e in math)
    assert receipt["environment"]["gpu"].startswith("NVIDIA H200")
