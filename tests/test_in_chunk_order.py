"""Gate 1's order probes inside a chunk: under every declared order, keys summed out of order inside a chunk round
apart on them even where the kernel hides its partials, red on every seed, and the red names the order."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.families.attention.probes import in_chunk_probe_row
from kcontract.families.attention.replay import replay_row
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.window import Window
from tests.helpers.chunk_order import FUSED_CONTRACT, reversed_in_chunks

SHAPE = Shape(head_dim=64, q_heads=4, kv_heads=2)
FP32_ORDERS = {"split_lanes": {"kernel": {"pv_key_groups": 8, "merge_runs": 8}}, "split_chain": {}}
MMA_ORDERS = {"split_mma": {}, "online_mma": {"grouping": "natural", "p_round": "bf16", "chains": 2}}


def _probe(seed: int, chunk: int, window: Window = Window(0, 8192)):
    row = in_chunk_probe_row(np.random.default_rng(seed), SHAPE, window, 2000 + 37 * seed, chunk)
    return row, row.floats()


@pytest.mark.parametrize("order", sorted(FP32_ORDERS))
def test_fp32_chains_reversed_inside_chunks_round_apart_on_every_seed(order):
    for seed in range(10):
        row, (q, k, v) = _probe(seed, 256)
        mine = replay_row(q, k, v, row.first, row.pos, 1.0, 256, 2, order=order, **FP32_ORDERS[order])["out"]
        other = replay_row(q, k, reversed_in_chunks(v, row.first, row.pos, 256), row.first, row.pos, 1.0, 256, 2,
                           order=order, **FP32_ORDERS[order])["out"]
        assert (mine[0] == mine[1]).all() and (other[0] == other[1]).all()  # both decided: exact replays
        assert (mine[0] != other[0]).sum() > SHAPE.q_heads * SHAPE.head_dim // 3, seed


@pytest.mark.parametrize("order", sorted(MMA_ORDERS))
def test_tensor_core_orders_decide_every_output_of_the_probe(order):
    chunk = 64 if order == "online_mma" else 256
    for seed in range(3):
        row, (q, k, v) = _probe(seed, chunk, Window(1000, 1100))
        lo, hi = replay_row(q, k, v, row.first, row.pos, 1.0, chunk, 2, order=order, **MMA_ORDERS[order])["out"]
        assert (lo == hi).all()
        assert np.count_nonzero(v) >= SHAPE.kv_heads * SHAPE.head_dim * (chunk // 2 if chunk == 64 else 32)


def test_no_probe_where_no_whole_chunk_fits_before_the_band():
    rng = np.random.default_rng(1)
    assert in_chunk_probe_row(rng, SHAPE, Window(0, 4096), 100, 64, last=60) is None
    assert in_chunk_probe_row(rng, SHAPE, Window(0, 4096), 100, 64, last=63) is not None


@pytest.mark.parametrize("seed", range(1, 11))
def test_a_fused_kernel_walking_a_chunks_k_steps_backwards_is_red_on_the_probes(tmp_path, seed):
    contract = tmp_path / "c.yaml"
    contract.write_text(FUSED_CONTRACT.replace("seed: 1", f"seed: {seed}"))
    report = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "--contract", str(contract), "--gate", "1", "--jobs", "1", "--json",
                                    str(report)], env={"KCONTRACT_CACHE": str(tmp_path / "cache"),
                                                       "KCONTRACT_IN_PROCESS": "1", "COLUMNS": "80"})
    assert done.exit_code == 0, done.output[-2000:]
    doc = json.loads(report.read_text())
    entry, control = doc["entries"][0]["gates"]["1"], doc["controls"][0]["gates"]["1"]
    assert entry["passed"] and not control["passed"]
    assert control["worst"]["case"] == "linear_400/order_probes"
    assert control["causes"] == ["an order other than the declared sum_order online_mma: the keys of a chunk or the "
                                 "chunks summed out of it (these probes round apart under any other order)"]
