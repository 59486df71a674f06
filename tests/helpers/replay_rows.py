"""Rows of one sequence for replay tests: views of one key buffer, as a prompt chunk's rows are."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.tensorcore import replay_scores
from kcontract.numerics import rn_bits


def sequence_rows(rng: np.random.Generator, hq: int, hk: int, d: int, firsts_and_ends: list[tuple[int, int]],
                  scored: bool = False, grouping: str = "natural") -> tuple[list[tuple], float]:
    """(rows (q, k, v, first, pos, scores or None) over one buffer of bf16 bits, scale); with `scored` each row
    carries its replayed scores, as the shared score replay gives them."""
    n = max(end for _, end in firsts_and_ends) + 1
    k = rn_bits(rng.standard_normal((n, hk, d)) * 0.2, "bf16")
    v = rn_bits(rng.standard_normal((n, hk, d)), "bf16")
    scale = float(np.float32(1 / np.sqrt(d)))
    rows = []
    for first, pos in firsts_and_ends:
        q = rn_bits(rng.standard_normal((hq, d)), "bf16")
        scores = None
        if scored:
            qf = (q.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            kf = (k[first:pos + 1].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            group = hq // hk
            scores = np.concatenate([replay_scores(qf[g * group:(g + 1) * group], kf[:, g, :], scale,
                                                   grouping=grouping) for g in range(hk)])
        rows.append((q, k[first:pos + 1], v[first:pos + 1], first, pos, scores))
    return rows, scale
