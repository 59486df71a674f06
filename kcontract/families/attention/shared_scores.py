"""Replayed scores of many rows over one sequence's keys, a block of rows at a time: the rows of a prompt chunk
share their keys, so one batched replay serves them all (one row at a time, the replay is launch-bound on a GPU).
The replay is exact fp32 arithmetic, so a row's scores are the same bits either way."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.bounds import as_float64, score_sums
from kcontract.families.attention.budget import working_values
from kcontract.numerics.xp import reference_module, to_device, to_host

SHARE = 8  # a block's scores (rows x query heads of one key head x keys) take this part of the working budget


def shared_scores(q: np.ndarray, k: np.ndarray, spans: list[tuple[int, int]], scale: float, xp=None,
                  grouping: str = "decode") -> list[np.ndarray]:
    """Each row's replayed fp32 scores [Hq, n_r] as float64: q [R, Hq, D] and k [n, Hk, D] as bf16 bits or values,
    spans[r] = (lo, hi), row r's keys k[lo .. hi]; k-steps over the head dims of `grouping`."""
    xp = reference_module() if xp is None else xp
    rows, hq, d = q.shape
    hk = k.shape[1]
    group = hq // hk
    found = [np.empty((hq, hi - lo + 1)) for lo, hi in spans]
    order = sorted(range(rows), key=lambda r: spans[r])
    elements, i = working_values() // SHARE, 0
    while i < rows:
        block = [order[i]]
        lo, hi = spans[order[i]]
        while i + len(block) < rows:
            nxt = order[i + len(block)]
            wider = (min(lo, spans[nxt][0]), max(hi, spans[nxt][1]))
            if (len(block) + 1) * group * (wider[1] - wider[0] + 1) > elements:
                break
            block.append(nxt)
            lo, hi = wider
        for g in range(hk):
            heads = slice(g * group, (g + 1) * group)
            qg = as_float64(to_device(np.ascontiguousarray(q[block][:, heads].reshape(-1, d)), xp))
            kg = to_device(np.ascontiguousarray(k[lo:hi + 1, g, :]), xp)
            s, _ = score_sums(qg, kg, scale, replay=True, with_abs=False, grouping=grouping)
            s = to_host(s).reshape(len(block), group, hi - lo + 1)
            for j, r in enumerate(block):
                found[r][heads] = s[j, :, spans[r][0] - lo:spans[r][1] - lo + 1]
        i += len(block)
    return found
