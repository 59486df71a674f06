"""Exact sums: when every partial sum of multiples of a unit is a value of a format, in any order."""

# Terms that are integer multiples of a power-of-two unit have partial sums that are multiples of it too, and no
# partial sum, in any order or association (tensor-core k-steps' cuts included: nothing lies below the unit), is
# larger in magnitude than the terms' absolute sum. Below 2^p units every such multiple is a value of a format of
# precision p, so every partial sum, and the sum, is exact.

from __future__ import annotations

import numpy as np

from .formats import fmt as as_format


def exact_sum_limit(fmt: str = "fp32", unit: float = 1.0) -> float:
    """2^p units: fmt holds every multiple of the power of two `unit` below this in magnitude."""
    f = as_format(fmt)
    if not (np.frexp(unit)[0] == 0.5 and f.min_subnormal <= unit <= f.max_finite * 2.0**-f.precision):
        raise ValueError(f"a unit that is a power of two with 2^p units finite in {f.name}, given: {unit!r}")
    return 2.0**f.precision * unit


def abs_sum_exact(abs_sum, fmt: str = "fp32", unit: float = 1.0) -> np.ndarray:
    """True where sums of multiples of `unit` whose magnitudes add to abs_sum are exact in fmt in any order."""
    return (np.asarray(abs_sum, dtype=np.float64) < exact_sum_limit(fmt, unit))[()]


def sums_exact(terms, axis=None, fmt: str = "fp32", unit: float = 1.0) -> np.ndarray:
    """True where every partial sum of `terms` along axis is exact in fmt in any order: all terms multiples of
    `unit`, their magnitudes adding to below 2^p units."""
    x = np.asarray(terms, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # inf or NaN terms: off the grid (an infinite one fails the sum anyway)
        on_grid = (np.trunc(x) == x if unit == 1.0 else np.fmod(x, unit) == 0).all(axis=axis)  # both exact
    return (on_grid & abs_sum_exact(np.abs(x).sum(axis=axis), fmt, unit))[()]
