"""Long rows' keys and values drawn a block of keys at a time, each block from its own stream, on a few threads:
the same bits whatever the threads, and numpy's draws and conversions release the GIL."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from kcontract.families.attention.rows import bf16_bits_of

BLOCK_KEYS = 8192  # keys one stream draws
THREADS = 4  # threads a row's draws share at most
SHARE = "OMP_NUM_THREADS"  # the threads a run's worker is given (its share of the cores), where it is set


def _blocks(n: int) -> list[tuple[int, int]]:
    return [(i, min(n, i + BLOCK_KEYS)) for i in range(0, n, BLOCK_KEYS)]


def _threads() -> int:
    """THREADS, within the process's share of the cores: a worker's OMP_NUM_THREADS, else every core."""
    share = os.environ.get(SHARE, "")
    return max(1, min(THREADS, int(share) if share.isdigit() else os.cpu_count() or 1))


def drawn_keys_values(base: int, k_rms: np.ndarray, v_rms: float, d: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 k [n, Hk, D], each vector normal rescaled to its `k_rms` [n, Hk], and v [n, Hk, D] normal times
    `v_rms`, block i of keys from the streams (base, i, 0) and (base, i, 1)."""
    n, hk = k_rms.shape
    k, v = np.empty((n, hk, d), dtype=np.float32), np.empty((n, hk, d), dtype=np.float32)

    def draw(index: int, span: tuple[int, int]) -> None:
        lo, hi = span
        x = np.random.default_rng([base, index, 0]).standard_normal((hi - lo, hk, d), dtype=np.float32)
        norm = np.sqrt(np.einsum("...i,...i->...", x, x)[..., None] / d)
        x *= (k_rms[lo:hi, :, None] / norm).astype(np.float32)
        k[lo:hi] = x
        np.random.default_rng([base, index, 1]).standard_normal((hi - lo, hk, d), dtype=np.float32, out=v[lo:hi])
        v[lo:hi] *= np.float32(v_rms)

    with ThreadPoolExecutor(_threads()) as pool:
        list(pool.map(draw, *zip(*enumerate(_blocks(n)))))
    return k, v


def bf16_bits_parallel(x: np.ndarray) -> np.ndarray:
    """bf16 bits (RN-even) of finite float32 x, a block of keys per task on a few threads (each in cache-sized
    pieces, rows.bf16_bits_of); x is consumed."""
    bits = np.empty(x.shape, dtype=np.uint16)

    def convert(span: tuple[int, int]) -> None:
        lo, hi = span
        bits[lo:hi] = bf16_bits_of(x[lo:hi])

    with ThreadPoolExecutor(_threads()) as pool:
        list(pool.map(convert, _blocks(len(x))))
    return bits
