"""Exact fp32 arithmetic on float64 arrays: one rounding per add or fma, ulp steps, directed rounding, intervals."""

# Every value here is an fp32 value held in float64 (or an exact product of two). An fp32 add or fma rounds the
# exact result once; float64 holds the exact sum of two such values up to one float64 rounding, whose error TwoSum
# recovers, so RN32 of the exact value is decided bit for bit. fp32 add, fma, multiplication by a nonnegative
# factor and division by a positive one are monotone in each operand, so evaluating an order twice, once at the
# ends of every operand's interval that lower the result and once at those that raise it, bounds the result.

from __future__ import annotations

import numpy as np

from . import fused
from .xp import array_module

FTZ = 2.0**-125  # absolute error of an fp32 result that is subnormal or flushed


def rn32(x: np.ndarray, err: np.ndarray | None = None) -> np.ndarray:
    """RN to fp32 of the exact value x + err (x float64, err its float64 rounding error), as float64."""
    xp = array_module(x)
    if err is not None and fused.usable(xp, x, err):
        return fused.kernel("rn32")(x, err)
    f = x.astype(xp.float32)
    r = f.astype(xp.float64)
    if err is None:
        return r
    up = xp.nextafter(f, np.float32(xp.inf)).astype(xp.float64)
    down = xp.nextafter(f, np.float32(-xp.inf)).astype(xp.float64)
    tie_up = (x == 0.5 * (r + up)) & (err > 0)  # x sits on a tie the exact value is past
    tie_down = (x == 0.5 * (r + down)) & (err < 0)
    return xp.where(tie_up, up, xp.where(tie_down, down, r))


def add32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """RN32(a + b) of float64 a and b (fp32 values, or an exact product): TwoSum keeps the exact sum."""
    xp = array_module(a, b)
    if fused.usable(xp, a, b):
        return fused.kernel("add32")(a, b)
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return rn32(s, err)


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RN32(a * b + c) for fp32 values held in float64 (a * b exact: at most 48 significant bits)."""
    xp = array_module(a, b, c)
    if fused.usable(xp, a, b, c):
        return fused.kernel("fma32")(a, b, c)
    return add32(a * b, c)


def ulp_steps(x: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """fp32 values `steps` ulps below and above RN32(x) (x >= 0; the lower one not below 0)."""
    xp = array_module(x)
    f = x.astype(xp.float32)
    lo, hi = f.copy(), f.copy()
    for _ in range(steps):
        lo = xp.where(lo > 0, xp.nextafter(lo, np.float32(0)), lo)
        hi = xp.nextafter(hi, np.float32(xp.inf))
    return lo.astype(xp.float64), hi.astype(xp.float64)


def exp_interval32(x: np.ndarray, ulps: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] fp32 bounds of an exp within `ulps` ulps of exp(x) for fp32 x, exact at 0 (1) and at -inf (0)."""
    xp = array_module(x)
    with np.errstate(over="ignore", under="ignore"):
        mid = xp.exp(x)
    lo, hi = ulp_steps(mid, ulps)
    lo = xp.where(x == 0, 1.0, xp.where(xp.isneginf(x), 0.0, lo))
    hi = xp.where(x == 0, 1.0, xp.where(xp.isneginf(x), 0.0, hi))
    return lo, hi


def div_interval32(n_lo, n_hi, d_lo, d_hi) -> tuple[np.ndarray, np.ndarray]:
    """fp32 bounds of RN32(n / d) for fp32 n in [n_lo, n_hi] and d in [d_lo, d_hi], d > 0 (via float64: exact RN32)."""
    xp = array_module(n_lo)
    with np.errstate(divide="ignore", invalid="ignore"):
        y_lo = xp.where(n_lo >= 0, n_lo / d_hi, n_lo / d_lo)
        y_hi = xp.where(n_hi >= 0, n_hi / d_lo, n_hi / d_hi)
    return rn32(y_lo), rn32(y_hi)


def fp32_at_least(x):
    """The least fp32 value >= x, as float64."""
    xp = array_module(x)
    f = x.astype(xp.float32)
    return xp.where(f.astype(xp.float64) < x, xp.nextafter(f, xp.float32(xp.inf)), f).astype(xp.float64)


def fp32_at_most(x):
    """The greatest fp32 value <= x, as float64."""
    xp = array_module(x)
    f = x.astype(xp.float32)
    return xp.where(f.astype(xp.float64) > x, xp.nextafter(f, xp.float32(-xp.inf)), f).astype(xp.float64)
