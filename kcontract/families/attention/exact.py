"""Exact expectations for integer mirrors: only the final division and output rounding may round."""

from __future__ import annotations

import numpy as np

from kcontract.numerics import round_to

DIVISION_ERROR = {  # relative error of the kernel's O / L in fp32, by declared division
    "ieee": 0.0,  # correctly rounded: handled exactly below
    "rcp_rn": 2.0**-23 + 2.0**-48,
    "rcp_approx": 2.0**-22 + 2.0**-46,
    "div_full": 2.0**-22,
    "fdividef": 2.0**-22,
}


def exact_quotient_bounds(numerator: np.ndarray, denominator: np.ndarray, div: str, out: str
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[lo, hi] in the output format for an fp32 division of exact integers, then output rounding."""
    exact = numerator / denominator  # float64: within 2^-53, never across an fp32 rounding boundary
    if div == "ieee":
        value = round_to(round_to(exact, "fp32"), out)
        return value, value.copy(), exact
    err = np.abs(exact) * DIVISION_ERROR[div]
    return round_to(exact - err, out), round_to(exact + err, out), exact
