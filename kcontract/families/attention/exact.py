"""Exact expectations for integer mirrors: only the final division and output rounding may round."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.bounds import DIV_ROUNDINGS
from kcontract.numerics import U32, gamma, round_to


def exact_quotient_bounds(numerator: np.ndarray, denominator: np.ndarray, div: str, out: str
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[lo, hi] in the output format for an fp32 division of exact integers, then output rounding."""
    exact = numerator / denominator  # float64: within 2^-53, never across an fp32 rounding boundary
    if div == "ieee":
        value = round_to(round_to(exact, "fp32"), out)
        return value, value.copy(), exact
    err = np.abs(exact) * float(gamma(DIV_ROUNDINGS[div], U32))  # the same allowance as gate 1's range
    return round_to(exact - err, out), round_to(exact + err, out), exact
