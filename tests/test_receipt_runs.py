"""The runs a receipt keeps: those that own a row, and its newest whole-contract run from a cold cache and from a
warm one, so that a warm run re-running every row keeps the cold run's wall seconds beside its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcontract.contract.loader import load_contract
from kcontract.receipts.rows import cache_state
from kcontract.receipts.write import run_receipt
from kcontract.report.receipt import receipt_markdown
from tests.helpers.receipts import passing_document

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "tests" / "contracts" / "cpu.yaml"
COLD = {"cache": "mixed", "hit": 3, "miss": 5, "off": 0, "rebuilt": 0}
WARM = {"cache": "warm", "hit": 8, "miss": 0, "off": 0, "rebuilt": 0}


@pytest.fixture(scope="module")
def loaded():
    return load_contract(str(CPU), import_kernels=False)


def write(loaded, previous, *, mode: str, stores: dict, wall_s: float, names: set[str] | None = None):
    """A run's receipt over `previous`: every row, or the rows named (as `run --stale` writes them)."""
    document = passing_document(loaded)
    if names is not None:
        document = {key: [o for o in document[key] if o["task"]["name"] in names] for key in ("entries", "controls")}
    for outcome in document["entries"] + document["controls"]:
        for result in outcome["gates"].values():
            result["seconds"] = 1.0
    document |= {"inputs": stores, "references": stores}
    return run_receipt(loaded, document, previous, mode=mode, seed=loaded.seed, wall_s=wall_s, gpu=False,
                       keep_rows=mode == "stale")


@pytest.mark.parametrize("stores, state", [(COLD, "cold"), (WARM, "warm"), (None, "cold"),
                                           ({"cache": "off", "hit": 0, "miss": 0}, "cold")])
def test_a_run_is_warm_only_where_every_input_and_reference_came_from_the_cache(stores, state):
    assert cache_state({"inputs": stores, "references": stores}) == state
    assert cache_state({"inputs": WARM, "references": COLD}) == "cold"


def test_a_warm_whole_run_keeps_the_cold_ones_wall_seconds_and_owns_every_row(loaded):
    cold = write(loaded, None, mode="whole", stores=COLD, wall_s=128.0)
    warm = write(loaded, cold, mode="whole", stores=WARM, wall_s=22.3)
    assert [(r["wall_s"], cache_state(r)) for r in warm.runs] == [(128.0, "cold"), (22.3, "warm")]
    owner = warm.runs[-1]["id"]
    assert {row["ran"]["run"] for row in warm.rows().values()} == {owner} and warm.wall_s == 22.3
    assert "its rows since run again" in receipt_markdown(warm)


def test_a_newer_whole_run_of_the_same_cache_state_replaces_the_older(loaded):
    first = write(loaded, None, mode="whole", stores=COLD, wall_s=130.0)
    warm = write(loaded, first, mode="whole", stores=WARM, wall_s=22.0)
    second = write(loaded, warm, mode="whole", stores=COLD, wall_s=90.0)
    assert [(r["wall_s"], cache_state(r)) for r in second.runs] == [(22.0, "warm"), (90.0, "cold")]


def test_a_stale_run_that_re_ran_some_rows_is_kept_beside_the_whole_runs(loaded):
    cold = write(loaded, None, mode="whole", stores=COLD, wall_s=128.0)
    some = {loaded.entries[0].name}
    stale = write(loaded, cold, mode="stale", stores=COLD, wall_s=4.0, names=some)
    assert [r["mode"] for r in stale.runs] == ["whole", "stale"] and stale.wall_s == 4.0
    nothing = write(loaded, stale, mode="stale", stores=WARM, wall_s=0.5, names=set())
    assert [r["mode"] for r in nothing.runs] == ["whole", "stale"] and nothing.wall_s == 4.0
