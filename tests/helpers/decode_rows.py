"""Decode rows for the range tests: an fp32 evaluation order, a drawn row, its chunks, and its tensor-core
scores by the H200's accumulation model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcontract.families.attention.spec import Arithmetic
from kcontract.numerics import round_to
from tests.oracles.mma_model import LITERATURE as MMA_H200
from tests.oracles.mma_model import chain as mma_chain


def bf16(x) -> np.ndarray:
    """float64 draws rounded to bf16 values."""
    return round_to(np.asarray(x, dtype=np.float64), "bf16")


@dataclass(frozen=True)
class Order:
    """One fp32 evaluation order of the split-chunk decode."""

    chunk: int = 256
    dot: str = "blas"  # blas | fma (random order over D) | pairwise | mma (tensor-core k-steps) | adversary
    acc: str = "seq"  # seq | perm | pairwise | blas (chunk sums)
    fma: bool = True  # p*v fused into the running sum, else rounded first
    merge: str = "seq"  # seq | perm | pairwise (sums over chunks)
    exp: str = "expf"  # expf | exp2f (log2e premultiplied) | __expf
    exp_ulps: int = 2  # random exp error, in ulps
    push: bool = False  # exp error +ulps on keys with v[:, :, 0] above its median, -ulps below (adversarial)
    prob_round: str = "none"
    div: str = "ieee"  # ieee | rcp_rn
    tile: int = 0  # > 0: online rescaling per tile of this many keys inside a chunk
    mma: bool = False  # declares tensor-core scores (dot "mma" computes them; "adversary" then uses their bound)

    def arithmetic(self) -> Arithmetic:
        """The declared arithmetic this order implements."""
        rescales = -(-self.chunk // self.tile) - 1 if self.tile else 0
        return Arithmetic(chunk=self.chunk, exp=self.exp, prob_round=self.prob_round, div=self.div,
                          rescales_per_key=rescales, score="mma_bf16" if self.mma else "fp32")


@dataclass
class Row:
    """One decode row: bf16 values as float64, its first absolute position and score scale."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    first: int
    scale: float


def chunk_index(first: int, n: int, chunk: int) -> np.ndarray:
    """Partial index of each key: chunks at absolute positions."""
    pos = first + np.arange(n)
    return pos // chunk - first // chunk


def draw_v(rng, n, hk, d, v_mean=0.0) -> np.ndarray:
    """Unit-RMS values, plus a per-column mean of magnitude about v_mean when given."""
    v = rng.standard_normal((n, hk, d))
    if v_mean:
        v += v_mean * rng.choice([-1.0, 1.0], (1, hk, d)) * rng.uniform(0.5, 1.5, (1, hk, d))
    return bf16(v)


def draw_row(rng, n, hq, hk, d, *, v_mean=0.0, peaks=0, lift=0.0, chunk=256) -> Row:
    """Realistic values: q RMS ~1, k RMS in 0.06..0.13, unit v (+ per-column mean), peaks, lifted chunks."""
    scale = float(np.float32(1 / np.sqrt(d)))
    q = rng.standard_normal((hq, d)) * rng.uniform(0.95, 1.05)
    k = rng.standard_normal((n, hk, d)) * rng.uniform(0.06, 0.13)
    lead = q[:: hq // hk]  # first query head of each group: [Hk, D]
    toward = lead / (scale * np.sum(lead * lead, axis=1, keepdims=True))  # +1 nat of that head's score
    first = int(rng.integers(0, 4 * chunk))
    if lift:
        c = chunk_index(first, n, chunk)
        nats = rng.uniform(0, lift, c[-1] + 1) * (rng.random(c[-1] + 1) < 0.5)
        k += nats[c][:, None, None] * toward[None]
    for j in rng.choice(n, size=min(peaks, n), replace=False):
        k[j] += 6.0 * toward
    return Row(bf16(q), bf16(k), draw_v(rng, n, hk, d, v_mean), first, scale)


def mma_steps(d: int) -> np.ndarray:
    """[D/16, 16] dims of each tensor-core k-step as the decode kernel groups them (lane t: 8 t + 0..3, 4..7)."""
    steps = []
    for pair in range(d // 32):
        for half in (0, 4):
            steps.append([32 * pair + 8 * t + half + i for t in range(4) for i in range(4)])
    return np.array(steps)


def mma_scores(row: Row) -> np.ndarray:
    """[Hq, n] dot products by the H200's tensor-core accumulation (the probe-validated model), step by step."""
    hq, d = row.q.shape
    g = hq // row.k.shape[1]
    idx = mma_steps(d)
    out = []
    for h in range(hq):
        keys = row.k[:, h // g, :][:, idx]  # [n, steps, 16]
        query = np.broadcast_to(row.q[h][idx], keys.shape)
        out.append(mma_chain(np.zeros(len(keys), np.float32), query, keys, MMA_H200))
    return np.stack(out).astype(np.float32)


def bf16_row(rng, heads: int, n: int, d: int, k_rms: float):
    """Random bf16 q [heads, D], k and v [n, 1, D] (k scaled by k_rms) and the fp32 scale 1 / sqrt(D)."""
    q = round_to(rng.standard_normal((heads, d)), "bf16")
    k = round_to(rng.standard_normal((n, 1, d)) * k_rms, "bf16")
    v = round_to(rng.standard_normal((n, 1, d)), "bf16")
    return q, k, v, float(np.float32(1 / np.sqrt(d)))
