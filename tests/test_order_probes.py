"""Order probes: gate 2 runs every matmul's and RMSNorm's batches again on rows whose plausible orders of the sum
round apart (over K: whole, 2, 3 or 4 pieces, merged in order, reversed or pairwise; over a row's squares: lanes,
vectors, warps, blocks), whatever the entry declares, and says how many of those orders its probes tell apart."""

from __future__ import annotations


import numpy as np
import pytest

from kcontract.families.matmul.orders import alternative_orders, probe_splits, replay, separated, tile_pieces
from kcontract.families.rmsnorm.orders import PLACEMENTS
from kcontract.families.rmsnorm.orders import alternative_orders as rms_orders
from kcontract.families.rmsnorm.orders import probe_rows as rms_probe_rows
from kcontract.families.rmsnorm.orders import separated as rms_separated
from kcontract.numerics import round_to
from tests.helpers.runs import gate_of_first, gate_run

CONTRACT = """version: 1
seed: 1
entries:
  - name: whole
    family: matmul
    kernel: {python: "tests.doubles.matmul:matmul"}
    arithmetic: {accumulate: fp32, split_k: 1, k_tile: 64, out: fp32}
    cases:
      - {name: m6_k1024_n32, m: 6, k: 1024, n: 32}
controls:
  - {name: split_from_m, entry: whole, gate: 2, fault: "K cut in two for calls of 8 rows or fewer",
     kernel: {python: "tests.doubles.matmul:sequential_split_from_rows"}}
"""


def test_the_probes_are_built_against_every_plausible_split_and_replay_seven_orders():
    assert tile_pieces(1000, 3, 64) == [(0, 320), (320, 640), (640, 1000)]
    assert [label for label, _ in probe_splits(4096, 64, [])] == ["split2", "split3", "split4"]
    assert [label for label, _ in probe_splits(4096, 64, [(0, 2048), (2048, 4096)])] == ["declared", "split3",
                                                                                       "split4"]
    assert [name for name, *_ in alternative_orders(4096, 64)] == [
        "K whole", "2 pieces", "3 pieces", "3 pieces reversed", "4 pieces", "4 pieces reversed", "4 pieces pairwise"]
    a = np.full((1, 4), 0x3F80, np.uint16)  # ones: every order of a sum of ones agrees
    b = np.full((2, 4), 0x3F80, np.uint16)
    assert replay(a, b, [(0, 2), (2, 4)], "reversed").tolist() == [[4.0, 4.0]]
    assert separated([{"a": a, "b": b}], 4, 1)[:2] == (0, 7)


# the control's fault registered as an entry too, a known finding: an entry's gate tallies every variant
WHOLE_ENTRY = CONTRACT[CONTRACT.index("  - name: whole"):CONTRACT.index("controls:")]
SPLIT_AS_ENTRY = CONTRACT.replace("controls:", WHOLE_ENTRY.replace("name: whole", "name: split_as_entry").replace(
    "tests.doubles.matmul:matmul", "tests.doubles.matmul:sequential_split_from_rows") + """known_findings:
  - {entry: split_as_entry, gate: 2, reason: "the split-from-M fault, tallied over every variant"}
controls:""")

@pytest.mark.parametrize("seed", range(1, 11))
def test_a_split_chosen_from_m_under_a_declared_whole_k_is_red_on_every_seed(tmp_path, seed):
    doc, printed = gate_run(tmp_path, SPLIT_AS_ENTRY, seed, 2)
    entry, whole_fault = (e["gates"]["2"] for e in doc["entries"])
    control = doc["controls"][0]["gates"]["2"]
    assert entry["passed"] and entry["facts"]["order_probes"]["m6_k1024_n32"]["told_apart"] == 7
    assert not whole_fault["passed"] and whole_fault["failures"] > 100, whole_fault["failures"]
    assert not control["passed"] and control["facts"]["stopped_at_case"] == "m6_k1024_n32"  # at its first red call
    assert 0 < control["failures"] < whole_fault["failures"] and control["checked"] < whole_fault["checked"]
    assert "order probes tell apart 7 of 7 orders" in printed


RMSNORM_CONTRACT = """version: 1
seed: 1
entries:
  - name: norm
    family: rmsnorm
    kernel: {python: "tests.doubles.rmsnorm:rmsnorm"}
    cases:
      - {name: h4096, hidden: 4096, rows: 8}
controls:
  - {name: threads_from_rows, entry: norm, gate: 2, fault: "the block's thread count chosen from the number of rows",
     kernel: {python: "tests.doubles.rmsnorm:threads_from_rows"}}
"""


def test_rmsnorm_probe_rows_cross_four_to_the_k_between_the_orders_and_tell_them_apart():
    rng = np.random.default_rng(3)
    w = round_to(1.0 + 0.1 * rng.standard_normal(1000), "bf16")
    rows = np.concatenate([rms_probe_rows(w, 1e-5, p, np.random.default_rng(4)) for p in PLACEMENTS])
    assert np.array_equal(round_to(rows, "bf16"), rows)  # every probe value is a bf16 value
    sums = {name: float(reduce((rows.astype(np.float32) ** 2).astype(np.float32))[0])
            for name, reduce in rms_orders()}
    assert len(set(sums.values())) >= 5  # the dust survives in different amounts
    told, of, alike = rms_separated(rows, w, 1e-5)
    assert of == 12 and told >= 9, alike


@pytest.mark.parametrize("seed", range(1, 11))
def test_an_rmsnorm_whose_order_follows_the_row_count_is_red_on_every_seed(tmp_path, seed):
    entry, control, _ = gate_of_first(tmp_path, RMSNORM_CONTRACT, seed, 2)
    assert entry["passed"] and entry["facts"]["order_probes"]["h4096"]["told_apart"] >= 9
    assert not control["passed"] and control["failures"] > 100, control["failures"]
