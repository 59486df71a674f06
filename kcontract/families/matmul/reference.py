"""The float64 reference of a b^T and the rigorous range of the declared accumulation.

Products of bf16 values are exact in fp32, so every partial sum of a dot product is a subset sum of exact
products, bounded by B = (sum |a_i b_i| + |a . b|) / 2, the larger of the positive and the negative products'
sums. fp32 additions in any order (splits included) cost gamma_{K-1} B; tensor-core k-steps chained over a
split of K / S terms cost mma_bounds.chained_dot_error(K / S) B, and the S splits' fp32 additions gamma_{S-1} B
more. Where every partial sum is an integer below 2^24 (the exact-sum rows) nothing rounds: the radius is 0.
"""

from __future__ import annotations

import numpy as np

from kcontract.numerics import U32, expected_bounds, gamma
from kcontract.numerics.fp32 import FTZ
from kcontract.numerics.mma_bounds import chained_dot_error
from kcontract.problem import Expected

SLACK = 2.0**-40  # float64 evaluation of the center and the bound
BLOCK = 1024  # rows per block of the float64 products


def relative_error(arith, k: int) -> float:
    """The bound's factor of B for the declared accumulation of K terms."""
    if arith.accumulate == "fp32":
        return float(gamma(max(k - 1, 0), U32))
    split = -(-k // arith.split_k)
    return chained_dot_error(split) + float(gamma(arith.split_k - 1, U32)) * (1 + chained_dot_error(split))


def ranges(a: np.ndarray, b: np.ndarray, arith) -> tuple[np.ndarray, np.ndarray]:
    """Center and radius [M, N]; a [M, K] and b [N, K] as float64 values."""
    center = np.empty((a.shape[0], b.shape[0]))
    radius = np.empty_like(center)
    rel = relative_error(arith, a.shape[1])
    abs_b = np.abs(b)
    exact_terms = bool(np.all(a == np.round(a)) and np.all(b == np.round(b)))
    for r0 in range(0, a.shape[0], BLOCK):
        ab = a[r0:r0 + BLOCK]
        dot = ab @ b.T
        mag = np.abs(ab) @ abs_b.T
        center[r0:r0 + BLOCK] = dot
        bound = 0.5 * (mag + np.abs(dot))
        rad = rel * bound + SLACK * mag + np.where(mag > 0, a.shape[1] * FTZ, 0.0)
        if exact_terms:  # integer products: every partial sum below 2^24 is exact in any order
            rad = np.where(mag < 2.0**24, 0.0, rad)
        radius[r0:r0 + BLOCK] = rad
    return center, radius


def expected(a: np.ndarray, b: np.ndarray, arith) -> Expected:
    """`out`'s range per element, rounded to its format."""
    center, radius = ranges(a, b, arith)
    lo, hi = expected_bounds(center, radius, arith.out)
    return Expected("out", arith.out, lo, hi, center, ("row", "col"))
