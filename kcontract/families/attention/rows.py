"""A row's content: its query and the keys and values at each absolute position it may touch."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from kcontract.numerics import bf16_bits_of_finite, from_bits, rn_bits


@dataclass
class RowData:
    """One row: q bits, visible k/v bits in key order, and a filler for keys outside the window."""

    pos: int
    first: int
    q: np.ndarray  # uint16 [Hq, D] bf16 bits
    k: np.ndarray  # uint16 [n, Hk, D] for positions first..pos
    v: np.ndarray  # uint16 [n, Hk, D]
    filler_seed: int = 0  # stream for finite keys stored outside the window
    filler_value: float | None = None  # if set, out-of-window keys hold this value instead of noise
    tag: str = ""  # how the row was drawn (plain, mean-shifted, peaked)
    extra: dict = field(default_factory=dict)

    def floats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, k, v as float64."""
        return from_bits(self.q, "bf16"), from_bits(self.k, "bf16"), from_bits(self.v, "bf16")

    def outside(self, positions: np.ndarray, hk: int, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Finite k/v bits for stored positions before the window (never visible to a correct kernel)."""
        return outside_bits(self.filler_seed, self.filler_value, len(positions), hk, d)


@functools.lru_cache(maxsize=64)
def outside_bits(seed: int, value: float | None, n: int, hk: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-window k/v bits of n keys: the value everywhere, or noise from (seed, n); made once per run, read-only."""
    if value is not None:
        k = rn_bits(np.full((n, hk, d), value), "bf16")
        v = k.copy()
    else:
        rng = np.random.default_rng([seed, n])
        k = bf16_bits_of(rng.standard_normal((n, hk, d), dtype=np.float32) * np.float32(0.1))
        v = bf16_bits_of(rng.standard_normal((n, hk, d), dtype=np.float32))
    k.flags.writeable = v.flags.writeable = False
    return k, v


def scaled_normal(rng: np.random.Generator, shape: tuple[int, ...], rms: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Normal draws rescaled so each vector along the last axis has the given RMS (to the dtype's precision)."""
    x = rng.standard_normal(shape, dtype=dtype)
    norm = np.sqrt(np.einsum("...i,...i->...", x, x)[..., None] / shape[-1])  # no squared copy of a long x
    x *= (rms[..., None] / norm).astype(dtype)
    return x


KEY_BLOCK = 1024  # keys a q = 0 row draws and repeats along itself


def repeated_keys(rng: np.random.Generator, n: int, hk: int, d: int) -> np.ndarray:
    """bf16 bits of n keys for a row whose q is 0, which weighs every key alike whatever it holds: a block of
    drawn keys (RMS 0.1) repeated along the row."""
    block = bf16_bits_of(rng.standard_normal((min(n, KEY_BLOCK), hk, d), dtype=np.float32) * np.float32(0.1))
    return np.resize(block, (n, hk, d))


BITS_BLOCK = 1 << 18  # values bf16_bits_of converts at once: its passes over a block stay in the cache


def bf16_bits_of(x: np.ndarray, values: int = BITS_BLOCK) -> np.ndarray:
    """bf16 bits of drawn (finite) float32 x by RN-even, a block of about `values` along axis 0 at a time (long
    rows stay lean, each block's passes in the cache); x is consumed."""
    bits = np.empty(x.shape, dtype=np.uint16)
    keys = max(1, values // max(1, x[0].size)) if len(x) else 1
    for i in range(0, len(x), keys):
        bits[i:i + keys] = bf16_bits_of_finite(np.ascontiguousarray(x[i:i + keys]))
    return bits
