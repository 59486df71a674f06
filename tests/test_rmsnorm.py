"""The rmsnorm family: fp32 evaluations in many orders stay inside the range, the numpy double passes its
contract and its planted faults go red, and the CUDA kernel's controls are patches of it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kcontract.families.rmsnorm.family import edge_rows, realistic_rows
from kcontract.families.rmsnorm.reference import residual_sum, row_ranges
from kcontract.families.rmsnorm.spec import Arithmetic
from kcontract.numerics import expected_bounds, round_to
from tests.helpers.cli import kcontract_in_process, no_traceback

CONTRACT = "tests/contracts/rmsnorm.yaml"


def fp32_orders(h: np.ndarray, w: np.ndarray, eps: float, rng: np.random.Generator):
    """bf16 outputs of fp32 RMSNorms: sequential, reversed, pairwise and blocked sums of squares, rsqrt pushed by
    up to 2 ulps either way, 1 / sqrt instead of rsqrt."""
    h32 = h.astype(np.float32)
    sq = h32 * h32
    sums = [np.add.reduce(sq, axis=1, dtype=np.float32), np.add.reduce(sq[:, ::-1], axis=1, dtype=np.float32),
            sq.sum(axis=1, dtype=np.float32), sq.reshape(len(h), -1, 1).sum(axis=1, dtype=np.float32)[:, 0]]
    seq = np.zeros(len(h), np.float32)
    for column in sq[:, rng.permutation(sq.shape[1])].T:
        seq = (seq + column).astype(np.float32)
    sums.append(seq)
    for s in sums:
        a = (s / np.float32(h.shape[1]) + np.float32(eps)).astype(np.float32)
        exact = (1 / np.sqrt(a.astype(np.float64))).astype(np.float32)
        for push in (-2, 0, 2):
            inv = (exact.view(np.int32) + push).view(np.float32)
            yield round_to((h32 * inv[:, None]).astype(np.float32) * w.astype(np.float32), "bf16")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31), hidden=st.sampled_from([7, 256, 1000, 4096]), residual=st.booleans())
def test_every_fp32_order_lies_in_the_range(seed, hidden, residual):
    rng = np.random.default_rng(seed)
    x = round_to(np.concatenate([realistic_rows(rng, 6, hidden), edge_rows(rng, hidden)]), "bf16")
    w = round_to(1 + 0.1 * rng.standard_normal(hidden), "bf16")
    h = residual_sum(x, round_to(realistic_rows(rng, len(x), hidden), "bf16")) if residual else x
    eps = float(np.float32(1e-6))
    center, radius = row_ranges(h, w, eps, Arithmetic(), fp32_h=residual)
    lo, hi = expected_bounds(center, radius, "bf16")
    for got in fp32_orders(h, w, eps, rng):
        assert np.all((got >= lo) & (got <= hi)), float(np.max(np.maximum(lo - got, got - hi)))
    assert np.mean(lo == hi) > 0.8  # most outputs are decided


def test_the_numpy_double_passes_and_its_faults_go_red():
    done = kcontract_in_process("run", "--contract", CONTRACT, "--jobs", "2")
    no_traceback(done)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "SUMMARY 2 kernels: 2 pass gates 1, 2 and 4, 0 fail, 0 known findings; 4 controls: 4 red as planted, "
        "0 missed; 0 limit problems")


def test_the_edge_rows_are_what_their_names_say():
    rows = edge_rows(np.random.default_rng(1), 4096)
    squares = rows ** 2
    assert not rows[0].any()
    assert squares[1].max() > 0.99 * squares[1].sum()
    assert squares[2].mean() < 1e-9
