"""Output ranges: a float64 range, or an exact quotient's, rounded to the output format."""

from __future__ import annotations

import numpy as np

from .bounds import U32, gamma
from .functions import DIV_ROUNDINGS
from .rounding import round_to


def expected_bounds(center: np.ndarray, radius: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """[RN(center - radius), RN(center + radius)] in fmt: RN is monotone, so RN(y) lies inside."""
    return round_to(center - radius, fmt), round_to(center + radius, fmt)


def exact_quotient_bounds(numerator: np.ndarray, denominator: np.ndarray, div: str, out: str
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[lo, hi] in the output format for an fp32 division of exact integers, then output rounding."""
    exact = numerator / denominator  # float64: within 2^-53, never across an fp32 rounding boundary
    if div == "ieee":
        value = round_to(round_to(exact, "fp32"), out)
        return value, value.copy(), exact
    err = np.abs(exact) * float(gamma(DIV_ROUNDINGS[div], U32))  # the division kind's allowance, as in any range
    return round_to(exact - err, out), round_to(exact + err, out), exact
