"""The float64 reference and rigorous per-output range of one split-chunk decode row.

The kernel's fp32 result y (before output rounding) lies in [center - radius, center + radius] for any
IEEE fp32 evaluation order consistent with the declared arithmetic; docs/families/attention.md section 2
derives each term. Keys are processed in blocks, so memory stays bounded at any context length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kcontract.families.attention.spec import Arithmetic
from kcontract.families.attention.tensorcore import replay_scores
from kcontract.families.attention.weights import WeightSystem, chunk_frames, score_error, weight_systems
from kcontract.numerics import U32, gamma, path_roundings
from kcontract.numerics.fp32 import FTZ
from kcontract.numerics.functions import DIV_ROUNDINGS
from kcontract.numerics.mma_bounds import bf16_parts, kstep_sum_error
from kcontract.numerics.xp import array_module, reference_module, segment_reduce, to_device, to_host

BLOCK = 2048  # keys per block of the batched sums
SLACK = 2.0**-30  # covers the float64 evaluation of the center and of the bound itself


@dataclass
class RowRange:
    """Per output [Hq, D]: the reference before output rounding and a rigorous radius around it."""

    center: np.ndarray
    radius: np.ndarray
    facts: dict = field(default_factory=dict)


def pv_parts(prob_round: str) -> int:
    """k-steps per 16 keys of p times V: one for bf16 p (prob_round bf16 or bf16_numerator), three for fp32 p."""
    return bf16_parts("bf16" if prob_round in ("bf16", "bf16_numerator") else "fp32")


def decode_row_range(q: np.ndarray, k: np.ndarray, v: np.ndarray, chunk_of_key: np.ndarray, scale: float,
                     arith: Arithmetic, xp=None, exact_scores: bool = False, scores=None) -> RowRange:
    """Reference and range of one row: q [Hq, D], k and v [n, Hk, D] (visible keys, key order), as values or
    bf16 bit patterns (uint16).

    xp (numpy or cupy, default the reference module: CuPy on a GPU) computes; the result is on the host.
    exact_scores: the inputs make every score exact in any order (mirror C), so E_j = 0 (unless sqrt(scale) rounds).
    scores: the row's replayed scores [Hq, n] where the caller formed them already (replayed orders only).
    """
    xp = reference_module() if xp is None else xp
    chunk_host = np.asarray(chunk_of_key, dtype=np.int64)
    hq, d, n, hk = check_row(np.asarray(q), np.asarray(k), np.asarray(v), chunk_host)
    q = as_float64(to_device(q, xp))
    k, v = to_device(k, xp), to_device(v, xp)  # bf16 bits (uint16) or floats; made float64 a block at a time
    chunk = xp.asarray(chunk_host)
    group = hq // hk
    starts = np.concatenate([[0], np.flatnonzero(np.diff(chunk_host)) + 1])
    n_chunks, max_chunk = len(starts), int(np.diff(np.append(starts, n)).max())
    r = arith.rescales_per_key
    # (C-1) adds + product + merge product + (nch-1) merge adds + rescales; l's terms are no products
    k_o = path_roundings((max_chunk, n_chunks), products=2, extra=r)
    k_l = path_roundings((max_chunk, n_chunks), products=1, extra=r)
    center = np.empty((hq, d))
    radius = np.empty((hq, d))
    determined, err_max = [], 0.0
    for g in range(hk):
        heads = slice(g * group, (g + 1) * group)
        s, abs_dot = head_scores(q[heads], k[:, g, :], scale, arith, scores, heads)
        exact = (exact_scores and arith.keeps_integer_scores) or arith.replays_scores
        err = xp.zeros_like(s) if exact else score_error(s, abs_dot, scale, d, arith)
        err_max = max(err_max, float(err.max()))
        frames = chunk_frames(s, err, starts)
        num, den = weight_systems(s, err, frames, chunk, starts, arith)
        o, rad = _group_range(num, den, v[:, g, :], starts, arith, max_chunk, k_o, k_l)
        center[heads], radius[heads] = to_host(o), to_host(rad)
        if num.determined is not None:
            determined.append(num.determined)
    facts = {"keys": n, "chunks": n_chunks, "max_chunk": max_chunk, "sum_roundings_o": k_o,
             "sum_roundings_l": k_l, "score_error_max": err_max, "device": "cpu" if xp is np else "gpu"}
    if determined:
        facts["determined_p"] = float(np.mean(determined))
    return RowRange(center, radius, facts)


def as_float64(x):
    """float64 values of an array of values, or of bf16 bit patterns (uint16), with its own array module."""
    xp = array_module(x)
    if x.dtype == np.uint16:
        return (x.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    return xp.ascontiguousarray(x, dtype=xp.float64)


def check_row(q, k, v, chunk) -> tuple[int, int, int, int]:
    """Shapes and chunk index; ValueError naming what is wrong."""
    if q.ndim != 2 or k.ndim != 3 or k.shape != v.shape:
        raise ValueError(f"q [Hq, D], k and v [n, Hk, D] alike, given {q.shape}, {k.shape}, {v.shape}")
    hq, d = q.shape
    n, hk, dk = k.shape
    if dk != d or n == 0 or hq % hk:
        raise ValueError(f"matching head dims, n >= 1 and Hq a multiple of Hk, given q {q.shape}, k {k.shape}")
    if chunk.shape != (n,) or chunk[0] != 0 or np.any((np.diff(chunk) != 0) & (np.diff(chunk) != 1)):
        raise ValueError("chunk_of_key [n]: starts at 0, steps by 0 or 1")
    return hq, d, n, hk


def score_sums(qg: np.ndarray, kg: np.ndarray, scale: float, replay: bool = False, with_abs: bool = True,
               grouping: str = "decode") -> tuple[np.ndarray, np.ndarray | None]:
    """Scores and sum_i |q_i k_i| (unless not `with_abs`), [G, n] each: scale * q.k exact as float64, or with
    `replay` the kernel's own fp32 scores by its declared tensor-core `grouping` (tensorcore.replay_scores)."""
    xp = array_module(qg)
    n = kg.shape[0]
    s = xp.empty((qg.shape[0], n))
    abs_dot = xp.empty_like(s) if with_abs else None
    aq = xp.abs(qg)
    for b0 in range(0, n, BLOCK):
        kb = as_float64(kg[b0:b0 + BLOCK])
        s[:, b0:b0 + BLOCK] = replay_scores(qg, kb, scale, xp, grouping) if replay else (kb @ qg.T).T * scale
        if with_abs:
            abs_dot[:, b0:b0 + BLOCK] = (xp.abs(kb) @ aq.T).T
    return s, abs_dot


def head_scores(qg, kg, scale: float, arith: Arithmetic, scores, heads: slice):
    """One key head's scores and |q||k| sums: the row's precomputed replayed scores where given (a prompt's
    shared replay), else computed here; replayed scores carry no error, so no |q||k| sums (None)."""
    if scores is not None and arith.replays_scores:
        return to_device(np.ascontiguousarray(scores[heads]), array_module(qg)), None
    return score_sums(qg, kg, scale, replay=arith.replays_scores, with_abs=not arith.replays_scores,
                      grouping=arith.score_grouping)


@np.errstate(over="ignore", invalid="ignore")  # absurd inputs: infinite radii, never NaN
def _group_range(num: WeightSystem, den: WeightSystem, vg: np.ndarray, starts, arith: Arithmetic,
                 max_chunk: int, k_o: int, k_l: int) -> tuple[np.ndarray, np.ndarray]:
    """Center and radius [G, D] of the query heads sharing one key head."""
    xp = array_module(vg)
    shared = num is den
    n, n_chunks = vg.shape[0], len(starts)
    lin = _linear_sums(num, vg)
    o = lin["numer"] / den.ref.sum(1)[:, None]
    ao = xp.abs(o)
    ch = _chunk_pass(num, vg, starts, o, shared)
    if shared:
        dev = ch["centered"] + ch["chunk_term"]
    else:
        dev = lin["dev_abs"] + ao * den.dev.sum(1)[:, None] + ch["chunk_term"]
    lo_sum = den.lo_sum[:, None]
    ok = lo_sum > 0
    safe = xp.where(ok, lo_sum, 1.0)
    r1 = xp.where(ok, dev / safe, xp.inf)  # weighted-average error of the exact sums
    e_o = _numerator_rounding(lin, ch, arith, max_chunk, k_o, n_chunks)
    g_l = float(gamma(k_l, U32))
    ops = (2 + arith.rescales_per_key) * n + 2 * n_chunks + 4
    r2 = (xp.where(ok, e_o / safe, xp.inf) + (ao + r1) * g_l) / (1 - g_l)  # fp32 sums
    r2 += 2 * ops * FTZ * (1 + ao + r1)  # flushed or subnormal sum terms, over L >= 1/2
    g_div = float(gamma(DIV_ROUNDINGS[arith.div], U32))
    avg_abs = xp.where(ok, lin["hi_abs"] / safe, xp.inf)
    if arith.normalise == "per_key":  # p_j / l rounds per key; each p may flush: n flushed products at most
        r2 *= 1 + g_div
        r3 = g_div * avg_abs / (1 - g_l) + n * FTZ * _column_max(vg)
    else:
        r3 = g_div * (ao + r1 + r2) + FTZ  # the division
    radius = (r1 + r2 + r3) * (1 + SLACK) + SLACK * (ao + avg_abs)
    radius = xp.where(lin["hi_abs"] > 0, radius, 0.0)  # an all-zero v column gives exactly 0 in any order
    return o, xp.where(xp.isnan(radius), xp.inf, radius)


def _numerator_rounding(lin: dict, ch: dict, arith: Arithmetic, max_chunk: int, k_o: int, n_chunks: int
                        ) -> np.ndarray:
    """Bound on |O_hat - sum a v| over the declared chunk structure (exact-max frame).

    Every rounding's error is at most u times the value it rounds: a product a_j v_j (sum P), an
    in-chunk partial sum or rescale (at most B_c = (P_c + |N_c|) / 2, the larger of the chunk's positive
    and negative parts), a merge product (|N_c|) or a merge partial sum (at most (sum_c |N_c| + |N|) / 2);
    a chunk summed on tensor cores errs by at most mma_bounds.kstep_sum_error times P_c instead.
    """
    xp = array_module(lin["numer"])
    drift = lin["dev_abs"] + ch["chunk_dev_abs"]  # >= sum_j |a_j - w_j| |v_j|
    p = lin["hi_abs"]
    s_n = ch["chunk_abs"] + drift  # >= sum_c |N_c| with the kernel's weights
    abs_n = xp.abs(lin["numer"]) + drift
    if arith.pv == "mma_bf16":  # exact products, k-step cuts and truncations (mma_bounds), rescaled accumulators
        chunk_sums = (kstep_sum_error(max_chunk, arith.chunk, pv_parts(arith.prob_round)) / U32
                      + arith.rescales_per_key) * p
    else:
        in_chunk = max_chunk - 1 + arith.rescales_per_key
        chunk_sums = p + in_chunk * 0.5 * (p + s_n)
    phi = chunk_sums + s_n + (n_chunks - 1) * 0.5 * (s_n + abs_n)
    return U32 * phi / (1 - (k_o + 1) * U32) ** 2


def _column_max(vg: np.ndarray) -> np.ndarray:
    """[D]: max_j |v_j| per column, a block of keys at a time."""
    xp = array_module(vg)
    top = xp.zeros(vg.shape[-1])
    for b0 in range(0, vg.shape[0], BLOCK):
        top = xp.maximum(top, xp.abs(as_float64(vg[b0:b0 + BLOCK])).max(0))
    return top


def _blocks(starts: np.ndarray, n: int):
    """(b0, b1, c0, nc, closes): keys [b0, b1) are nc whole chunks of one size from c0, or a piece of one."""
    ends = np.append(starts[1:], n)
    c = 0
    while c < len(starts):
        size = ends[c] - starts[c]
        if size > BLOCK:
            for b0 in range(starts[c], ends[c], BLOCK):
                b1 = min(b0 + BLOCK, ends[c])
                yield int(b0), int(b1), c, 1, b1 == ends[c]
            c += 1
            continue
        nc = 1
        while c + nc < len(starts) and ends[c + nc] - starts[c + nc] == size and (nc + 1) * size <= BLOCK:
            nc += 1
        yield int(starts[c]), int(ends[c + nc - 1]), c, nc, True
        c += nc


def _linear_sums(num: WeightSystem, vg: np.ndarray) -> dict:
    """Matrix products over key blocks: sum w v, sum a_hi |v| and sum D |v|: [G, D] each."""
    xp = array_module(vg)
    g, n, d = num.ref.shape[0], vg.shape[0], vg.shape[1]
    out = {"numer": xp.zeros((g, d)), "hi_abs": xp.zeros((g, d)), "dev_abs": xp.zeros((g, d))}
    for b0 in range(0, n, BLOCK):
        vb = as_float64(vg[b0:b0 + BLOCK])
        av = xp.abs(vb)
        out["numer"] += (vb.T @ num.ref[:, b0:b0 + BLOCK].T).T
        out["hi_abs"] += (av.T @ num.hi[:, b0:b0 + BLOCK].T).T
        out["dev_abs"] += (av.T @ num.dev[:, b0:b0 + BLOCK].T).T
    return out


def _chunk_pass(num: WeightSystem, vg: np.ndarray, starts, o: np.ndarray, shared: bool) -> dict:
    """Per-chunk sums N_c = sum b_ref v folded into [G, D] totals, and sum_j D_j |v_j - o| if shared.

    chunk_abs = sum_c G_ref |N_c|; chunk_term = sum_c dG_c |N_c - o sum b_ref| (shared) or dG_c |N_c|;
    chunk_dev_abs = sum_c dG_c |N_c|; centered = sum_j D_j |v_j - o| exactly (no |v| + |o| shortcut).
    """
    xp = array_module(vg)
    g, n, d = num.ref.shape[0], vg.shape[0], vg.shape[1]
    names = ("chunk_abs", "chunk_term", "chunk_dev_abs", "centered")
    out = {name: xp.zeros((g, d)) for name in names}
    lam = segment_reduce(num.chunk_ref, starts, "sum")  # [G, nch]: sum of b_ref per chunk
    carry = xp.zeros((g, d))
    part = xp.empty((BLOCK, d))
    for b0, b1, c0, nc, closes in _blocks(starts, n):
        vb = as_float64(vg[b0:b1])
        buf = part[:b1 - b0]
        for h in range(g):
            xp.multiply(num.chunk_ref[h, b0:b1, None], vb, out=buf)
            sums = buf.reshape(nc, -1, d).sum(1)
            sums[0] += carry[h]
            carry[h] = 0.0 if closes else sums[0]
            if shared:
                xp.subtract(vb, o[h], out=buf)
                xp.abs(buf, out=buf)
                out["centered"][h] += buf.T @ num.dev[h, b0:b1]
            if not closes:
                continue
            cs = slice(c0, c0 + nc)
            out["chunk_abs"][h] += num.chunk_scale[h, cs] @ xp.abs(sums)
            if num.chunk_dev is not None:
                dg = num.chunk_dev[h, cs]
                out["chunk_dev_abs"][h] += dg @ xp.abs(sums)
                out["chunk_term"][h] += dg @ (xp.abs(sums - o[h] * lam[h, cs, None]) if shared else xp.abs(sums))
    return out
