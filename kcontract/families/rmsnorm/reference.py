"""The float64 reference of RMSNorm and the rigorous range of any fp32 evaluation in the declared arithmetic.

y_i = h_i w_i / sqrt(S / H + eps) with S = sum h^2. Every term of S is positive, so any fp32 order gives
S (1 + theta), |theta| <= gamma_k with k = H - 1 additions, a rounding per square where h is fp32 (a bf16 square
is exact), and the mean's and eps's roundings: A_hat = A (1 + phi), |phi| <= gamma_k. Then 1 / sqrt(A_hat) errs by
at most gamma_k / (2 (1 - gamma_k)) relative, rsqrt by its documented ulps (and one of margin), and the two
products h * inv and * w by u each.
"""

from __future__ import annotations

import numpy as np

from kcontract.numerics import U32, expected_bounds, gamma, round_to
from kcontract.numerics.fp32 import FTZ
from kcontract.problem import Expected

RSQRT_REL = {"rsqrtf": 3 * 2.0**-23, "sqrt_div": 2 * U32}  # rsqrtf: 2 ulps and one of margin; 1/sqrtf: 2 RN
MEAN_ROUNDINGS = {"div": 1, "rcp": 2}
FP32_MAX = float(np.finfo(np.float32).max)
SLACK = 2.0**-40  # float64 evaluation of the center and the bound


def residual_sum(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """h = RN32(x + r) of bf16 values (as float64), as the fused kernel adds them."""
    return (x.astype(np.float32) + r.astype(np.float32)).astype(np.float64)


def row_ranges(h: np.ndarray, w: np.ndarray, eps: float, arith, fp32_h: bool) -> tuple[np.ndarray, np.ndarray]:
    """Center and radius [rows, H] of y before output rounding; h [rows, H] and w [H] as float64 values."""
    hidden = h.shape[1]
    s = np.einsum("rh,rh->r", h, h)  # float64 sum of exact squares: within 2^-53 H of S
    a = s / hidden + eps
    center = h * w / np.sqrt(a)[:, None]
    k = hidden - 1 + (hidden if fp32_h else 0) + MEAN_ROUNDINGS[arith.mean] + 1
    g = float(gamma(k, U32))
    inv_rel = g / (2 * (1 - g))
    rel = (1 + inv_rel) * (1 + RSQRT_REL[arith.rsqrt]) * (1 + U32) ** 2 - 1
    radius = np.abs(center) * (rel + SLACK) + 4 * FTZ * (1 + np.abs(w))
    overflow = s * (1 + g) > FP32_MAX  # an fp32 sum of squares may overflow: nothing is promised
    radius = np.where(overflow[:, None], np.inf, radius)
    return center, np.where((h == 0) | (w == 0), 0.0, radius)  # a zero h or w gives exactly 0 (inv is finite)


def expected(h: np.ndarray, w: np.ndarray, eps: float, arith, fp32_h: bool) -> Expected:
    """The output `out`'s range per element, rounded to its format."""
    center, radius = row_ranges(h, w, eps, arith, fp32_h)
    lo, hi = expected_bounds(center, radius, arith.out)
    return Expected("out", arith.out, lo, hi, center, ("row", "col"))


def residual_expected(h: np.ndarray) -> Expected:
    """h_out = RN_bf16(h): decided everywhere."""
    value = round_to(h, "bf16")
    return Expected("h_out", "bf16", value, value.copy(), h, ("row", "col"))
