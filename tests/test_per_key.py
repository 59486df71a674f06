"""Unfused attention declared as it computes: per-key normalised probabilities (`normalise: per_key`), q and k
scaled by sqrt(scale) (`score_scale: sqrt_split`), and tensor-core P.V with online rescales."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcontract.families.attention.bounds import decode_row_range
from kcontract.families.attention.spec import ROW_CHUNK, Arithmetic
from kcontract.numerics import expected_bounds, rn_bits
from tests.doubles.decode import f32_of_bf16
from tests.doubles.math_softmax import attend
from tests.helpers.cli import kcontract_in_process, no_traceback

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = "tests/contracts/per_key.yaml"
PER_KEY = Arithmetic(normalise="per_key", score_scale="sqrt_split", partials="hidden")


def row(seed: int, n: int, d: int, hq: int, peak: float):
    """bf16 bits of a realistic row: q [Hq, D], k and v [n, Hq, D] (one key head per query head)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((hq, d))
    k = rng.standard_normal((n, hq, d)) * 0.1
    k[rng.integers(n)] += peak * q / max(float(np.linalg.norm(q)), 1.0) * 0.1
    v = rng.standard_normal((n, hq, d)) + 1.0
    return (rn_bits(q, "bf16"), rn_bits(k, "bf16"), rn_bits(v, "bf16"))


def orders(q, k, v, scale, rng):
    """fp32 results of the unfused attention in several evaluation orders: as written, keys permuted, l and P.V in
    pieces."""
    qf, kf, vf = f32_of_bf16(q), f32_of_bf16(k), f32_of_bf16(v)
    yield attend(qf, kf, vf, scale)
    perm = rng.permutation(kf.shape[0])
    yield attend(qf, kf[perm], vf[perm], scale)
    yield attend(qf, kf, vf, scale, blocks=int(rng.integers(2, 9)))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 700), d=st.sampled_from([64, 128, 256]),
       peak=st.floats(0.0, 60.0))
def test_every_order_of_an_unfused_attention_lies_in_its_per_key_range(seed, n, d, peak):
    q, k, v = row(seed, n, d, 2, peak)
    scale = float(np.float32(1 / np.sqrt(d)))
    rng = decode_row_range(q, k, v, np.zeros(n, np.int64), scale, PER_KEY, xp=np)
    lo, hi = expected_bounds(rng.center, rng.radius, "bf16")
    for got in orders(q, k, v, scale, np.random.default_rng(seed)):
        out = f32_of_bf16(rn_bits(got.astype(np.float64), "bf16"))
        assert np.all((out >= lo) & (out <= hi)), (np.abs(out - rng.center) - rng.radius).max()


def test_per_key_ranges_are_wider_than_one_division_and_still_decide_most_outputs():
    q, k, v = row(7, 500, 128, 2, 8.0)
    scale = float(np.float32(128 ** -0.5))
    per_key = decode_row_range(q, k, v, np.zeros(500, np.int64), scale, PER_KEY, xp=np)
    after = decode_row_range(q, k, v, np.zeros(500, np.int64), scale,
                             Arithmetic(chunk=ROW_CHUNK, partials="hidden"), xp=np)
    assert np.all(per_key.radius >= after.radius)
    lo, hi = expected_bounds(per_key.center, per_key.radius, "bf16")
    assert np.mean(lo == hi) > 0.5


def test_online_rescales_widen_a_tensor_core_p_v():
    q, k, v = row(3, 300, 128, 2, 4.0)
    base = dict(score="mma_bf16", pv="mma_bf16", prob_round="bf16", chunk=ROW_CHUNK, partials="hidden")
    plain = decode_row_range(q, k, v, np.zeros(300, np.int64), 0.088, Arithmetic(**base), xp=np)
    online = decode_row_range(q, k, v, np.zeros(300, np.int64), 0.088, Arithmetic(**base, rescales_per_key=8),
                              xp=np)
    assert np.all(online.radius > plain.radius)
    assert np.array_equal(online.center, plain.center)


@pytest.mark.parametrize("fields, missing", [
    ({"normalise": "per_key"}, "partials: hidden"),
    ({"normalise": "per_key", "partials": "hidden", "chunk": 256}, "the whole row as one chunk"),
    ({"normalise": "per_key", "partials": "hidden", "pv": "mma_bf16"}, "pv: fp32"),
    ({"normalise": "per_key", "partials": "hidden", "rescales_per_key": 4}, "no online rescales"),
    ({"score": "mma_bf16", "score_scale": "sqrt_split"}, "needs score: fp32"),
    ({"pv": "mma_bf16", "chunk": 100}, "a multiple of 16"),
])
def test_what_cannot_be_declared_is_refused_naming_what_is_missing(fields, missing):
    with pytest.raises(ValueError, match=missing):
        Arithmetic(**fields)


def test_the_unfused_double_passes_and_its_controls_go_red():
    done = kcontract_in_process("run", "--contract", CONTRACT, "--jobs", "2")
    no_traceback(done)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "SUMMARY 2 kernels: 2 pass gates 1, 2 and 4, 0 fail, 0 known findings; 2 controls: 2 red as planted, "
        "0 missed; 0 limit problems")


def test_declared_with_one_division_after_the_sums_the_unfused_double_is_red_at_its_mirrors(tmp_path):
    text = (ROOT / CONTRACT).read_text().replace(
        "arithmetic: {normalise: per_key, score_scale: sqrt_split, partials: hidden}",
        f"arithmetic: {{chunk: {ROW_CHUNK}, partials: hidden}}")
    contract = tmp_path / "after_sum.yaml"
    contract.write_text(text.split("controls:")[0])
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    done = kcontract_in_process("run", "--contract", str(contract), "--only", "np_math_d256_g2", "--gate", "4",
                                "--jobs", "1")
    no_traceback(done)
    assert done.returncode == 1
    assert "mirror-B" in done.stderr and "(decided)" in done.stderr
