"""The package's tensor-core replay equals the probe-validated H200 model bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from kcontract.families.attention.tensorcore import kstep_dims, replay_dots
from kcontract.numerics import kstep, round_to
from tests.oracles.mma_model import LITERATURE, chain, mma_sum


def bf16(x):
    return round_to(np.asarray(x, float), "bf16")


@pytest.mark.parametrize("seed", range(6))
def test_one_kstep_matches_the_model(seed):
    rng = np.random.default_rng(seed)
    shape = (4000,)
    scale = np.exp2(rng.integers(-30, 30, size=shape + (16,)))
    a = bf16(rng.standard_normal(shape + (16,)) * scale)
    b = bf16(rng.standard_normal(shape + (16,)) * np.exp2(rng.integers(-20, 20, size=shape + (16,))))
    c = np.float32(rng.standard_normal(shape) * np.exp2(rng.integers(-40, 40, size=shape)))
    if seed % 2:  # exact cancellation between two products, and zero terms
        a[:, 1], b[:, 1] = -a[:, 0], b[:, 0]
        a[:, 12:] = 0
    want = mma_sum(c, a, b, LITERATURE).astype(np.float64)
    got = kstep(c.astype(np.float64), a, b)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))  # signs of zeros included


@pytest.mark.parametrize("d", [128, 256, 512])
def test_a_whole_dot_matches_the_chained_model(d):
    rng = np.random.default_rng(d)
    q = bf16(rng.standard_normal((3, d)))
    k = bf16(rng.standard_normal((500, d)) * 0.1)
    idx = kstep_dims(d)
    want = np.stack([chain(np.zeros(500, np.float32), np.broadcast_to(q[h][idx], (500,) + idx.shape), k[:, idx],
                           LITERATURE) for h in range(3)]).astype(np.float64)
    assert np.array_equal(replay_dots(q, k), want)


def test_dots_formed_a_tile_at_a_time_keep_every_bit():
    from kcontract.numerics.tensorcore import kstep_dots

    rng = np.random.default_rng(5)
    q = bf16(rng.standard_normal((7, 128)) * np.where(rng.random((7, 128)) < 0.2, 0.0, 2.0 ** rng.integers(-60, 8)))
    k = bf16(rng.standard_normal((60, 128)) * 0.1)
    groups = kstep_dims(128)
    whole = kstep_dots(q, k, groups, terms=1 << 40)
    for terms in (16, 16 * 7 * 5, 1000):  # one dot, a tile of 5 columns, tiles of rows and columns
        assert np.array_equal(kstep_dots(q, k, groups, terms=terms).view(np.uint64), whole.view(np.uint64)), terms
