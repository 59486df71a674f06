"""Long rows' keys and values are drawn a block at a time on threads: the same bits whatever the threads, each key
vector at its RMS, and bf16 bits as the one-pass conversion gives them."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention import draws
from kcontract.numerics import bf16_bits_of_finite


def test_the_bits_do_not_depend_on_the_threads(monkeypatch):
    k_rms = np.random.default_rng(0).uniform(0.5, 2.0, size=(3 * draws.BLOCK_KEYS + 5, 2))
    monkeypatch.setattr(draws, "THREADS", 1)
    one = draws.drawn_keys_values(7, k_rms, 1.5, 16)
    monkeypatch.setattr(draws, "THREADS", 4)
    four = draws.drawn_keys_values(7, k_rms, 1.5, 16)
    assert all(np.array_equal(a, b) for a, b in zip(one, four))
    assert not np.array_equal(one[0], draws.drawn_keys_values(8, k_rms, 1.5, 16)[0])  # the base picks the streams
    k, v = one
    rms = np.sqrt(np.mean(k.astype(np.float64) ** 2, axis=-1))
    assert np.allclose(rms, k_rms, rtol=1e-5) and k.dtype == v.dtype == np.float32
    assert 1.4 < float(np.sqrt(np.mean(v.astype(np.float64) ** 2))) < 1.6


def test_bf16_bits_in_blocks_are_the_one_pass_bits(monkeypatch):
    x = np.random.default_rng(1).standard_normal((2 * draws.BLOCK_KEYS + 3, 1, 8)).astype(np.float32)
    whole = bf16_bits_of_finite(x.copy())
    assert np.array_equal(draws.bf16_bits_parallel(x), whole)


def test_a_worker_draws_on_its_share_of_the_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what the pool gives each of as many workers as cores
    assert draws._threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "16")
    assert draws._threads() == draws.THREADS
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert draws._threads() == max(1, min(draws.THREADS, __import__("os").cpu_count() or 1))
