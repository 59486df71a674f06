"""Rigorous error of p times V summed in tensor-core k-steps (the H200 model in tensorcore.py), for any k-step order.

One k-step cuts each of its 17 terms (16 products and the accumulator c) to a multiple of 2^(E - 25), 2^E at most
the largest term, and truncates the sum to fp32: its error is below (17 2^-25 + 2^-23) (1 + 2^-20) A, A = |c| plus
the step's |terms|, which is at most the running absolute sum of every term so far. fp32 p goes in as three bf16
parts (hi, mid, lo; their magnitudes add to at most (1 + 2^-7) p), bf16 p as one; a chunk of n consecutive keys
touches at most ceil(n / 16) + 1 k-steps of 16 aligned keys (a k-step of zero terms leaves c exact).
"""

from __future__ import annotations

import math

KEYS = 16  # keys per k-step
CUT = 2.0**-25  # one term's cut, relative to the step's largest term
RZ = 2.0**-23  # the fp32 truncation, relative to the step's result
PER_STEP = (17 * CUT + RZ) * (1 + 2.0**-20) * (1 + 2.0**-6)  # per k-step, relative to the chunk's sum of |p v|


def parts(prob_round: str) -> int:
    """k-steps per 16 keys: three bf16 parts for fp32 p, one for bf16 p."""
    return 1 if prob_round in ("bf16", "bf16_numerator") else 3


def steps(keys: int, chunk: int) -> int:
    """k-steps a chunk's `keys` consecutive keys can touch."""
    return min(chunk // KEYS, math.ceil(keys / KEYS) + 1) if keys > 0 else 0


def relative_error(keys: int, chunk: int, prob_round: str) -> float:
    """|o_hat - sum p v| over a chunk of `keys` keys, relative to sum |p v|: every k-step's cut and truncation."""
    return parts(prob_round) * steps(keys, chunk) * PER_STEP
