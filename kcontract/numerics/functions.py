"""Accuracy of CUDA's math functions and divisions, as documented: ulps of exp forms, roundings of quotients."""

from __future__ import annotations

import numpy as np

from .xp import array_module

EXP_ULPS = {"expf": 2.0, "exp2f": 2.0, "ex2.approx": 2.0, "__expf": 2.0}  # documented max ulp error
EXP_SLOPE = {"__expf": 1.173}  # extra ulps per unit |x| (nats)
EXP_MARGIN_ULPS = 1.0  # the documented figures are tests, not proofs
DIV_ROUNDINGS = {"ieee": 1, "rcp_rn": 2, "rcp_approx": 5, "div_full": 6, "fdividef": 6}  # u's of a quotient


def exp_log_error(absx: np.ndarray, calls: int, form: str) -> np.ndarray:
    """l with (1 - eta, 1 + eta) inside (e^-l, e^l) for `calls` exps of this form whose arguments total absx."""
    xp = array_module(absx)
    ulps = calls * (EXP_ULPS[form] + EXP_MARGIN_ULPS) + EXP_SLOPE.get(form, 0.0) * absx
    eta = ulps * 2.0**-23
    return xp.where(eta < 0.5, -xp.log1p(-xp.minimum(eta, 0.5)), 50.0)
