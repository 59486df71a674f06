"""The float64 reference of a b^T and the rigorous range of the declared accumulation.

Products of bf16 values are exact in fp32, so every partial sum of a dot product is a subset sum of exact
products, bounded by B = (sum |a_i b_i| + |a . b|) / 2, the larger of the positive and the negative products'
sums. fp32 additions in any order (splits included) cost gamma_{K-1} B; tensor-core k-steps chained over a
piece of at most T terms (the split's whole k tiles) cost mma_bounds.chained_dot_error(T) B, and the S pieces'
fp32 additions gamma_{S-1} B more. The float64 center and magnitudes err by at most 2 (K + 2) 2^-53 of the
magnitudes in any order. Where every partial sum is an integer below 2^24 (the exact-sum rows) nothing rounds:
the radius is 0.
"""

from __future__ import annotations

import numpy as np

from kcontract.numerics import U32, expected_bounds, gamma
from kcontract.numerics.fp32 import FTZ
from kcontract.numerics.mma_bounds import chained_dot_error
from kcontract.numerics.xp import reference_module, to_device, to_host
from kcontract.problem import Expected

BLOCK = 1024  # rows per block of the float64 products
F64 = 2.0**-53


def relative_error(arith, k: int) -> float:
    """The bound's factor of B for the declared accumulation of K terms."""
    if arith.accumulate == "fp32":
        return float(gamma(max(k - 1, 0), U32))
    chain = chained_dot_error(min(k, arith.piece_terms(k)))  # k-steps of zeros past K leave the sum exact
    return chain + float(gamma(arith.split_k - 1, U32)) * (1 + chain)


def ranges(a: np.ndarray, b: np.ndarray, arith) -> tuple[np.ndarray, np.ndarray]:
    """Center and radius [M, N] (host arrays); a [M, K] and b [N, K] as float64 values, multiplied where references
    compute (CuPy on a GPU)."""
    xp = reference_module()
    k = a.shape[1]
    center = np.empty((a.shape[0], b.shape[0]))
    radius = np.empty_like(center)
    rel = relative_error(arith, k)
    slack = 2 * (k + 2) * F64  # any float64 order of the center's and the magnitudes' sums
    bd = to_device(b, xp)
    abs_b = xp.abs(bd)
    exact_terms = bool(np.all(a == np.round(a)) and np.all(b == np.round(b)))
    for r0 in range(0, a.shape[0], BLOCK):
        ab = to_device(a[r0:r0 + BLOCK], xp)
        dot = ab @ bd.T
        mag = xp.abs(ab) @ abs_b.T
        bound = 0.5 * (mag + xp.abs(dot))
        rad = rel * bound + slack * mag + xp.where(mag > 0, k * FTZ, 0.0)
        if exact_terms:  # integer products: every partial sum below 2^24 is exact in any order
            rad = xp.where(mag < 2.0**24, 0.0, rad)
        center[r0:r0 + BLOCK], radius[r0:r0 + BLOCK] = to_host(dot), to_host(rad)
    return center, radius


def expected(a: np.ndarray, b: np.ndarray, arith) -> Expected:
    """`out`'s range per element, rounded to its format."""
    center, radius = ranges(a, b, arith)
    lo, hi = expected_bounds(center, radius, arith.out)
    return Expected("out", arith.out, lo, hi, center, ("row", "col"))
