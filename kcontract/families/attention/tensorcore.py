"""Replay of a kernel's tensor-core scores, bit for bit: the H200's mma k-step (probe-validated model,
kcontract/numerics/tensorcore.py) over the kernel's declared grouping of head dims, so a declared order's scores
carry no error (E_j = 0).

tests/oracles/mma_model.py holds the model as an exact oracle and docs/decisions/0003-tensor-core-accumulation-model.md
how it was validated on the H200 (4.9 million sums); tests/test_tensorcore.py checks this replay against the oracle.
"""

from __future__ import annotations

import numpy as np

from kcontract.numerics.tensorcore import STEP, kstep_dots
from kcontract.numerics.xp import array_module

GROUPINGS = ("decode", "natural")  # the head dims each k-step takes: the decode kernel's, or 16 s .. 16 s + 15


def kstep_dims(head_dim: int, grouping: str = "decode") -> np.ndarray:
    """[D/16, 16] head dims of each k-step: "decode" as the decode kernel feeds them (lane t: 8 t + 0..3, then
    4..7), "natural" dims 16 s .. 16 s + 15 in step s (a wgmma over a K-major tile)."""
    if grouping == "natural":
        return np.arange(head_dim).reshape(-1, STEP)
    if grouping != "decode":
        raise ValueError(f"a k-step grouping of {' or '.join(GROUPINGS)}, given: {grouping!r}")
    steps = []
    for pair in range(head_dim // 32):
        for half in (0, 4):
            steps.append([32 * pair + 8 * t + half + i for t in range(4) for i in range(4)])
    return np.array(steps)


def replay_dots(q, k, xp=None, grouping: str = "decode"):
    """[G, n] tensor-core dot products of queries q [G, D] with keys k [n, D] (bf16 values as float64), k-steps
    over the head dims of `grouping` (kstep_dims) in step order."""
    xp = xp or array_module(k)
    return kstep_dots(q, k, kstep_dims(q.shape[1], grouping), xp)


def replay_scores(q, k, scale: float, xp=None, grouping: str = "decode"):
    """The kernel's fp32 scores RN(dot * scale) as float64: exact, for a kernel that declares this grouping."""
    xp = xp or array_module(k)
    dots = replay_dots(q, k, xp, grouping)
    return (dots.astype(xp.float32) * xp.float32(scale)).astype(xp.float64)
