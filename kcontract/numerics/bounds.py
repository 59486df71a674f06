"""Classic rounding-error bounds: Higham's gamma_n, and the roundings on a term's path through fp32 chains."""

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


def path_roundings(lengths, products: int = 0, extra=0):
    """Roundings on one term's path through nested fp32 chains: n - 1 additions in each chain of n terms (lengths,
    ints or arrays), plus `products` rounded products and `extra` other roundings (rescales, say)."""
    return sum(n - 1 for n in lengths) + products + extra
