"""Classic rounding-error bound constants (Higham's gamma_n)."""

from __future__ import annotations

import numpy as np

U32 = 2.0**-24  # unit roundoff of fp32
U_BF16 = 2.0**-8  # unit roundoff of bf16


def gamma(n, u: float) -> np.ndarray:
    """gamma_n = n*u / (1 - n*u), vectorised over n; ValueError where n*u >= 1."""
    nu = np.asarray(n, dtype=np.float64) * u
    if np.any(nu >= 1):
        raise ValueError(f"gamma needs n*u < 1, given n*u up to {float(np.max(nu))}")
    return (nu / (1.0 - nu))[()]
