"""Units in the last place: ordered integers of bit patterns, neighbours and spacings."""

from __future__ import annotations

import numpy as np

from .formats import Format
from .formats import fmt as as_format
from .rounding import from_bits, to_bits


def ordered(bits, fmt: str | Format) -> np.ndarray:
    """Monotone int64 map of bit patterns: -0 and +0 give 0, ±inf the ends (NaN lands beyond them)."""
    f = as_format(fmt)
    b = np.asarray(bits).astype(np.int64)
    sign = (b >> (f.bits - 1)) & 1
    mag = b & ((1 << (f.bits - 1)) - 1)
    return np.where(sign == 1, -mag, mag)[()]


def _unordered(o: np.ndarray, f: Format) -> np.ndarray:
    """Bit patterns of ordered ints (0 gives +0)."""
    o = np.asarray(o, dtype=np.int64)
    return np.where(o < 0, (1 << (f.bits - 1)) | -o, o).astype(f.uint)


def ulp_distance(a_bits, b_bits, fmt: str | Format) -> np.ndarray:
    """Signed distance a - b in units of fmt's grid (ordered ints)."""
    return (np.asarray(ordered(a_bits, fmt)) - np.asarray(ordered(b_bits, fmt)))[()]


def next_up(x, fmt: str | Format) -> np.ndarray:
    """The least value of fmt above x (x must be in fmt); max_finite goes to inf, inf and NaN stay."""
    f = as_format(fmt)
    x = np.asarray(x, dtype=np.float64)
    o = np.asarray(ordered(to_bits(x, f), f)) + 1
    r = from_bits(_unordered(o, f), f)
    r = np.where(x == -f.min_subnormal, -0.0, r)  # IEEE nextUp(-min_subnormal) is -0
    return np.where(np.isnan(x) | (x == np.inf), x, r)[()]


def next_down(x, fmt: str | Format) -> np.ndarray:
    """The greatest value of fmt below x (x must be in fmt): -next_up(-x)."""
    return (-np.asarray(next_up(-np.asarray(x, dtype=np.float64), fmt)))[()]


def ulp_of(x, fmt: str | Format) -> np.ndarray:
    """Spacing of fmt's grid at |x|: 2**(max(e, emin) - precision + 1) with e = floor(log2|x|)."""
    f = as_format(fmt)
    a = np.abs(np.asarray(x, dtype=np.float64))
    finite = np.isfinite(a)
    af = np.where(finite, a, 0.0)
    e = np.where(af == 0, f.emin, np.frexp(af)[1].astype(np.int32) - 1)
    s = np.ldexp(1.0, (np.maximum(e, f.emin) - f.precision + 1).astype(np.int32))
    return np.where(finite, s, a)[()]
