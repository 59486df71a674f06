"""A numpy fp32 RMSNorm on the rmsnorm ABI, as a block of 256 threads computes it: strided per-thread sums of
squares, a fixed tree over the threads, S / hidden + eps, rsqrt, then (h * inv) * w rounded to bf16."""

from __future__ import annotations

import numpy as np

from kcontract.numerics import bf16_from_f32_bits

from .decode import f32_of_bf16

THREADS = 256


def block_sum(sq: np.ndarray, threads: int = THREADS, acc=None) -> np.ndarray:
    """[rows] fp32: thread t adds elements t, t + threads, ... in order (rounded by `acc`), then a pairwise tree."""
    rows, hidden = sq.shape
    pad = np.zeros((rows, -(-hidden // threads) * threads), np.float32)
    pad[:, :hidden] = sq
    lanes = pad.reshape(rows, -1, threads)
    part = np.zeros((rows, threads), np.float32)
    for step in range(lanes.shape[1]):
        part = part + lanes[:, step]
        if acc is not None:
            part = acc(part)
    while part.shape[1] > 1:
        half = part.shape[1] // 2
        part = part[:, :half] + part[:, half:]
    return part[:, 0]


def normalise(h: np.ndarray, w, out, hidden: int, eps, threads: int = THREADS, acc=None, eps_after_sqrt=False,
              keep: int | None = None) -> None:
    """out = bf16((h * inv) * w) with inv = rsqrt(S / hidden + eps), S over the first `keep` elements."""
    squares = (h * h).astype(np.float32)
    if keep is not None:
        squares[:, keep:] = 0
    s = block_sum(squares, threads, acc)
    mean = (s / np.float32(hidden)).astype(np.float32)
    if eps_after_sqrt:
        inv = (np.float32(1) / (np.sqrt(mean) + np.float32(eps))).astype(np.float32)
    else:
        inv = (1 / np.sqrt((mean + np.float32(eps)).astype(np.float64))).astype(np.float32)
    out[...] = bf16_from_f32_bits((h * inv[:, None]).astype(np.float32) * f32_of_bf16(w)[None, :])


def rmsnorm(x, w, out, *, hidden, eps):
    """The correct double."""
    normalise(f32_of_bf16(x), w, out, int(hidden), eps)


def rmsnorm_residual(x, residual, w, out, h_out, *, hidden, eps):
    """h = x + r in fp32, written as bf16; the fp32 h normalised."""
    h = f32_of_bf16(x) + f32_of_bf16(residual)
    h_out[...] = bf16_from_f32_bits(h)
    normalise(h, w, out, int(hidden), eps)


def eps_after_sqrt(x, w, out, *, hidden, eps):
    """Control: 1 / (sqrt(mean) + eps)."""
    normalise(f32_of_bf16(x), w, out, int(hidden), eps, eps_after_sqrt=True)


def threads_from_rows(x, w, out, *, hidden, eps):
    """Control: the block's thread count (so the sum's order) chosen from the number of rows."""
    normalise(f32_of_bf16(x), w, out, int(hidden), eps, threads=128 if len(x) > 8 else 256)


def bf16_accumulator(x, w, out, *, hidden, eps):
    """Control: each thread's running sum of squares kept in bf16."""
    normalise(f32_of_bf16(x), w, out, int(hidden), eps, acc=lambda a: f32_of_bf16(bf16_from_f32_bits(a)))


def tail_dropped(x, w, out, *, hidden, eps):
    """Control: the squares past the last whole 256-element block left out of the sum."""
    normalise(f32_of_bf16(x), w, out, int(hidden), eps, keep=int(hidden) // THREADS * THREADS)
