"""Rigorous per-chunk ranges of a decode row's partials: m_c, l_c and o_c in fp32 (docs 2.8).

The kernel's scores lie within their error E_j of the exact ones, so its chunk maximum lies in
[max(s - E), max(s + E)]; each p = exp(RN(s_hat - m_hat)) lies in an interval from the exp and argument
errors (bf16-rounded where declared, flushed where tiny); l_c and o_c are fp32 sums of those, any order.
Mirror C's inputs make every score exact (E_j = 0), which leaves only the exp's and the sums' error: at
fp32 resolution, 2^16 times finer than a bf16 output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcontract.families.attention.bounds import as_float64, check_row, head_scores, pv_parts
from kcontract.families.attention.spec import Arithmetic
from kcontract.families.attention.weights import ARG_U, F64, chunk_frames, score_error
from kcontract.numerics import U32, U_BF16, gamma, path_roundings, round_to
from kcontract.numerics.fp32 import FTZ
from kcontract.numerics.functions import exp_log_error
from kcontract.numerics.mma_bounds import kstep_sum_error
from kcontract.numerics.xp import array_module, reference_module, segment_reduce, to_device, to_host

CHUNKS_PER_BLOCK = 32  # chunks whose o sums are formed together (bounded memory at any context)
SLACK = 2.0**-40  # relative: the float64 evaluation of centers and radii


@dataclass
class PartialRanges:
    """[Hq, nch] lo/hi/center of m and l, [Hq, nch, D] of o, for one row's chunks in order."""

    m: tuple[np.ndarray, np.ndarray, np.ndarray]
    l: tuple[np.ndarray, np.ndarray, np.ndarray]
    o: tuple[np.ndarray, np.ndarray, np.ndarray]


def partial_ranges(q, k, v, chunk_of_key, scale: float, arith: Arithmetic, exact_scores: bool = False,
                   xp=None, scores=None) -> PartialRanges:
    """Ranges of every chunk partial of one row: q [Hq, D], k and v [n, Hk, D] (values or bf16 bits)."""
    xp = reference_module() if xp is None else xp
    chunk_host = np.asarray(chunk_of_key, dtype=np.int64)
    hq, d, n, hk = check_row(np.asarray(q), np.asarray(k), np.asarray(v), chunk_host)
    q = as_float64(to_device(q, xp))
    k, v = to_device(k, xp), to_device(v, xp)
    chunk = xp.asarray(chunk_host)
    group = hq // hk
    starts = np.concatenate([[0], np.flatnonzero(np.diff(chunk_host)) + 1])
    sizes = np.diff(np.append(starts, n))
    parts = {name: [] for name in ("m", "l", "o")}
    for g in range(hk):
        replay = arith.replays_scores
        heads = slice(g * group, (g + 1) * group)
        s, abs_dot = head_scores(q[heads], k[:, g, :], scale, arith, scores, heads)
        exact = exact_scores and arith.keeps_integer_scores
        err = xp.zeros_like(s) if exact or replay else score_error(s, abs_dot, scale, d, arith)
        frames = chunk_frames(s, err, starts)
        p_lo, p_hi, p_ref = _p_bounds(s, err, frames, chunk, arith)
        parts["m"].append(_m_range(frames, arith))
        parts["l"].append(_l_range(p_lo["l"], p_hi["l"], p_ref["l"], starts, sizes, arith))
        parts["o"].append(_o_range(p_lo["o"], p_hi["o"], p_ref["o"], v[:, g, :], starts, sizes, arith))
    out = {}
    for name, groups in parts.items():
        lo, hi, center = (np.concatenate([to_host(grp[i]) for grp in groups]) for i in range(3))
        out[name] = (round_to(lo, "fp32"), round_to(hi, "fp32"), center)
    return PartialRanges(out["m"], out["l"], out["o"])


LOG2_UNITS = ("exp2f", "ex2.approx")  # exp forms whose kernels keep m in log2 units (m * log2 e, rounded)


def _m_range(frames, arith: Arithmetic):
    """[G, nch] lo, hi, center of the kernel's m_c: natural units, or log2 units for exp2 forms."""
    if arith.exp not in LOG2_UNITS:
        return [frames.mc_lo, frames.mc_hi, frames.mc]
    xp = array_module(frames.mc)
    l2e = 1.0 / np.log(2.0)
    a, b = frames.mc_lo * l2e, frames.mc_hi * l2e
    widen = 2 * U32 * xp.maximum(xp.abs(a), xp.abs(b)) + FTZ  # the scaling's roundings, already in err otherwise
    return [a - widen, b + widen, frames.mc * l2e]


def _p_bounds(s, err, frames, chunk, arith: Arithmetic):
    """Per key [G, n]: bounds on the kernel's p in its chunk frame, for l's sum and for o's (bf16 where rounded)."""
    xp = array_module(s)
    mc_lo, mc_hi = frames.mc_lo[:, chunk], frames.mc_hi[:, chunk]
    x_lo = s - err - mc_hi  # the computed s_hat - m_hat lies in [x_lo, x_hi], both <= 0
    x_hi = xp.minimum(s + err - mc_lo, 0.0)
    exact_one = x_lo >= 0  # the key is its chunk's computed maximum for sure: p = exp(0) = 1
    xa = -x_lo
    calls = 1 + arith.rescales_per_key
    e = ARG_U * U32 * xa + exp_log_error(xa, calls, arith.exp) + F64 * (xp.abs(s) + xp.abs(mc_hi) + xp.abs(mc_lo) + 1.0)
    p_lo = xp.where(exact_one, 1.0, xp.exp(x_lo - e))
    p_hi = xp.where(exact_one, 1.0, xp.exp(x_hi + e))
    tiny = p_lo < 2 * FTZ  # the kernel's p may be subnormal or flushed
    p_lo = xp.where(tiny, 0.0, p_lo)
    p_hi = p_hi + xp.where(tiny, FTZ, 0.0)
    p_ref = xp.exp(s - frames.mc[:, chunk])
    plain = (p_lo, p_hi, p_ref)
    if arith.rescales_per_key:  # rounded in a running max's frame, then rescaled: a factor within 1 +- 2^-8
        rounded = (p_lo * (1 - U_BF16), p_hi * (1 + U_BF16), p_ref)
    else:  # rounded in the chunk's frame: RN is monotone
        rounded = tuple(round_to(p, "bf16") for p in plain)
    use = {"none": ("plain", "plain"), "bf16": ("rounded", "rounded"), "bf16_numerator": ("plain", "rounded")}
    pick = {"plain": plain, "rounded": rounded}
    l_kind, o_kind = use[arith.prob_round]
    return ({"l": pick[l_kind][0], "o": pick[o_kind][0]}, {"l": pick[l_kind][1], "o": pick[o_kind][1]},
            {"l": pick[l_kind][2], "o": pick[o_kind][2]})


def _sum_roundings(sizes: np.ndarray, arith: Arithmetic, products: int) -> np.ndarray:
    """gamma_k per chunk: n_c - 1 additions, a product per term (o), and the online rescales' multiplications."""
    return gamma(path_roundings((sizes,), products, arith.rescales_per_key * sizes), U32)


def _l_range(p_lo, p_hi, p_ref, starts, sizes, arith: Arithmetic):
    """[G, nch] lo, hi, center of l_c = fp32 sum of p over the chunk (every p >= 0)."""
    xp = array_module(p_lo)
    g = xp.asarray(_sum_roundings(sizes, arith, 0))[None, :]
    flush = xp.asarray(sizes * FTZ * 2.0)[None, :]  # sums of flushed or subnormal terms
    lo = segment_reduce(p_lo, starts, "sum") * (1 - g) * (1 - SLACK) - flush
    hi = segment_reduce(p_hi, starts, "sum") * (1 + g) * (1 + SLACK) + flush
    return [xp.maximum(lo, 0.0), hi, segment_reduce(p_ref, starts, "sum")]


def _o_range(p_lo, p_hi, p_ref, vg, starts, sizes, arith: Arithmetic):
    """[G, nch, D] lo, hi, center of o_c = sum of p v over the chunk in fp32 or tensor-core k-steps, any order."""
    xp = array_module(p_lo)
    mid, rad = 0.5 * (p_lo + p_hi), 0.5 * (p_hi - p_lo)
    sums = {name: [] for name in ("mid", "rad", "abs", "ref")}
    vmax = 0.0
    for c0 in range(0, len(starts), CHUNKS_PER_BLOCK):
        c1 = min(c0 + CHUNKS_PER_BLOCK, len(starts))
        k0, k1 = int(starts[c0]), int(starts[c1]) if c1 < len(starts) else vg.shape[0]
        vb = as_float64(vg[k0:k1])
        vmax = max(vmax, float(xp.abs(vb).max()))
        local = starts[c0:c1] - k0
        idx, inside = _padded_index(local, k1 - k0, xp)
        vpad = xp.where(inside[..., None], vb[xp.minimum(idx, k1 - k0 - 1)], 0.0)  # [nc, C, D]
        at = xp.minimum(idx, k1 - k0 - 1)
        for names, vv in ((("mid", "ref"), vpad), (("rad", "abs"), xp.abs(vpad))):
            w = xp.stack([{"mid": mid, "ref": p_ref, "rad": rad, "abs": p_hi}[n][:, k0:k1][:, at] for n in names])
            w = xp.where(inside[None, None], w, 0.0).transpose(0, 2, 1, 3)  # [2, nc, G, C]
            for name, got in zip(names, xp.matmul(w, vv[None])):  # [nc, G, D] each
                sums[name].append(got.transpose(1, 0, 2))
    mid_s, rad_s, abs_s, ref_s = (xp.concatenate(sums[n], axis=1) for n in ("mid", "rad", "abs", "ref"))
    if arith.pv == "mma_bf16":
        rel = [kstep_sum_error(int(n), arith.chunk, pv_parts(arith.prob_round)) for n in sizes]
    else:
        rel = _sum_roundings(sizes, arith, 1)
    g = xp.asarray(rel)[None, :, None]
    flush = xp.asarray(sizes * FTZ * 2.0 * (1 + vmax))[None, :, None]
    radius = (rad_s + g * abs_s) * (1 + SLACK) + SLACK * xp.abs(mid_s) + flush
    return [mid_s - radius, mid_s + radius, ref_s]


def _padded_index(starts: np.ndarray, n: int, xp):
    """[nseg, longest] key indices of each segment and which of them lie inside it."""
    ends = np.append(starts[1:], n)
    longest = int((ends - starts).max())
    idx = xp.asarray(starts)[:, None] + xp.arange(longest)[None, :]
    return idx, idx < xp.asarray(ends)[:, None]
