"""Per-key weight intervals of a split-chunk decode row, in the frame of the row's exact maximum score.

A kernel's effective weight of key j is a_j = f_c * p_j (merge factor times chunk probability). Up to
one positive factor common to every key (which cancels in O / L), a_j = G_c * b_j + tau_j with a
chunk factor G_c in [G_lo, G_hi], a key factor b_j in [b_lo, b_hi] and |tau_j| <= tau from flushed
results. A WeightSystem carries what the range needs: the reference weights and per-key deviations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcontract.families.attention.spec import Arithmetic
from kcontract.numerics import U32, U_BF16, gamma, round_to
from kcontract.numerics.fp32 import FTZ
from kcontract.numerics.functions import exp_log_error
from kcontract.numerics.mma_bounds import chained_dot_error
from kcontract.numerics.xp import array_module, segment_reduce

SCORE_ROUNDINGS = {"expf": 2, "__expf": 2, "exp2f": 4, "ex2.approx": 4}  # beyond the D of the dot product
SCALE_ROUNDINGS = {"score": 2, "sqrt_split": 5}  # relative roundings of a product's scaling (docstring above)
ARG_U = 4.0  # roundings on exp arguments (subtract, log2e scaling), in u per unit |x|
FRAME_U = 2.0  # a chunk max rescaled into log2 units for p but not for f: u per unit |m_c|
F64 = 2.0**-40  # relative slack for one float64-evaluated quantity


@dataclass
class Frames:
    """Chunk maxima of the exact scores and intervals for the kernel's computed ones: [G, nch], [G, 1]."""

    mc: np.ndarray
    mc_lo: np.ndarray
    mc_hi: np.ndarray
    top: np.ndarray  # S: the row's exact maximum score
    top_hi: np.ndarray  # an upper bound of any computed row maximum


@dataclass
class WeightSystem:
    """Reference weights and deviation bounds of one sum (numerator or denominator): arrays [G, n]."""

    ref: np.ndarray  # w_j = G_ref * b_ref: the reference weight of each key
    dev: np.ndarray  # D_j >= |a_j - w_j| outside the chunk term (per-key part and tau)
    hi: np.ndarray  # a_hi_j >= a_j
    lo_sum: np.ndarray  # [G]: sum_j a_lo_j, a lower bound of sum_j a_j
    chunk_ref: np.ndarray  # [G, n] b_ref: the key factor of the reference weight
    chunk_scale: np.ndarray  # [G, nch] G_ref: ref = chunk_scale[chunk] * chunk_ref
    chunk_dev: np.ndarray | None  # [G, nch] max |G_c - G_ref| where kept apart from dev, else None
    determined: float | None  # fraction of keys whose bf16 p is known exactly (replay only)


def score_error(s: np.ndarray, abs_dot: np.ndarray, scale: float, head_dim: int, arith: Arithmetic) -> np.ndarray:
    """|s_hat - s| for any-order fp32 dots of bf16 values, or tensor-core k-step chains; 0 where every product is 0.

    Products of bf16 values are exact in fp32, so every partial sum is bounded by the larger of the
    positive and the negative product sums, B = (sum |q_i k_i| + |q.k|) / 2: IEEE additions, scale and
    log2e roundings cost gamma_{D+k} B; a prescaled q (rounded q_i * scale, then rounded products)
    costs gamma_2 sum |q_i k_i| more; q and k each times a rounded sqrt(scale) (sqrt_split) cost gamma_5 and a
    rounding per product. Tensor-core k-step chains cost mma_bounds.chained_dot_error(D) B (each k-step cuts its
    terms below the largest and truncates its result).
    """
    xp = array_module(s)
    a = abs(scale) * abs_dot
    b = 0.5 * (a + xp.abs(s))
    extra = float(gamma(SCORE_ROUNDINGS[arith.exp], U32)) if arith.score == "mma_bf16" else 0.0
    if arith.score == "mma_bf16":
        dot = chained_dot_error(head_dim) * b  # |partial sums| <= B + the error so far, for every step
    else:
        dot = float(gamma(head_dim + SCORE_ROUNDINGS[arith.exp], U32)) * b
    scaling = SCALE_ROUNDINGS[arith.score_scale]
    if arith.score_scale == "sqrt_split":  # fp32 q and k: every product rounds too
        dot = float(gamma(head_dim + 1 + SCORE_ROUNDINGS[arith.exp], U32) * (1 + gamma(scaling, U32))) * b
    err = dot + extra * b * (1 + 2 * U32) + (float(gamma(scaling, U32)) + 4 * F64) * a
    return err + xp.where(abs_dot > 0, (head_dim + 2) * FTZ * (abs(scale) + 1.0), 0.0)


def chunk_frames(s: np.ndarray, err: np.ndarray, starts: np.ndarray) -> Frames:
    """Per-chunk max of s, s - err and s + err (any computed max lies between the last two)."""
    mc = segment_reduce(s, starts, "max")
    mc_lo = segment_reduce(s - err, starts, "max")
    mc_hi = segment_reduce(s + err, starts, "max")
    return Frames(mc, mc_lo, mc_hi, mc.max(1, keepdims=True), mc_hi.max(1, keepdims=True))


def merge_log_error(fr: Frames, arith: Arithmetic) -> np.ndarray:
    """[G, nch] log-error of f_c = exp(m_c - M) (argument rounding, exp accuracy)."""
    xp = array_module(fr.mc)
    ymax = xp.maximum(fr.top_hi - fr.mc_lo, 0.0)  # |m_c - M| over every computed m_c, M
    moving = ymax > 0  # ymax == 0: m_c = M for sure, f_c = exp(0) = 1 exactly
    return xp.where(moving, ARG_U * U32 * ymax + exp_log_error(ymax, 1, arith.exp), 0.0)


def frame_shift(mc_lo: np.ndarray, mc_hi: np.ndarray) -> np.ndarray:
    """Log-error of p's frame when m_c is rescaled to log2 units for p and not for f."""
    xp = array_module(mc_lo)
    return FRAME_U * U32 * xp.maximum(xp.abs(mc_lo), xp.abs(mc_hi))


def flush_tau(err: np.ndarray, arith: Arithmetic) -> float:
    """Bound on |a_j - G_c b_j| from flushed p, f and rescale factors, in the exact-max frame."""
    worst = max(float(err.max()), 0.0) if err.size else 0.0
    return 4.0 * (2 + arith.rescales_per_key) * FTZ * float(np.exp(worst))


def _per_chunk(x: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Expand [G, nch] to [G, n] by each key's chunk."""
    return x[:, chunk]


def _lo_sum(g_lo: np.ndarray, b_lo: np.ndarray, starts: np.ndarray, n: int, tau: float) -> np.ndarray:
    """sum_c G_lo,c sum_{j in c} b_lo,j - n tau (a lower bound of the weights' sum)."""
    return (g_lo * segment_reduce(b_lo, starts, "sum")).sum(1) - n * tau


def bf16_reference(s: np.ndarray, fr: Frames, chunk: np.ndarray) -> np.ndarray:
    """exp(m_c - S) * RN_bf16(exp(s - m_c)): the reference weight when p is rounded to bf16."""
    xp = array_module(s)
    mc = _per_chunk(fr.mc, chunk)
    return xp.exp(mc - fr.top) * round_to(xp.exp(s - mc), "bf16")


def frame_free(s, err, fr: Frames, chunk, starts, arith: Arithmetic, *, bf16_p: bool) -> WeightSystem:
    """Weights in the global frame, where the computed chunk max cancels between p and f (fp32 p).

    With bf16_p (online rescaling: the rounding frame is unknown) every p carries a bf16 rounding
    factor (1 +- 2^-8) and the reference weight is the bf16 one.
    """
    xp = array_module(s)
    n = s.shape[1]
    xmax = xp.maximum(_per_chunk(fr.mc_hi, chunk) - (s - err), 0.0)  # |s_hat - m_hat_c| upper bound
    moving = xmax > 0  # xmax == 0: the key is its chunk's computed max for sure, p = exp(0) = 1
    calls = 1 + arith.rescales_per_key
    lam = err + xp.where(moving, ARG_U * U32 * xmax + exp_log_error(xmax, calls, arith.exp), 0.0)
    lam += F64 * (xp.abs(s) + xp.abs(fr.top) + 1.0)
    w = xp.exp(s - fr.top)  # exp(s_j - S)
    b_hi = w * xp.exp(lam)
    b_lo = w * xp.exp(-lam)
    ref = w
    if bf16_p:
        b_hi *= 1 + U_BF16
        b_lo *= 1 - U_BF16
        ref = bf16_reference(s, fr, chunk)
    lam_c = merge_log_error(fr, arith) + frame_shift(fr.mc_lo, fr.mc_hi)
    g_hi, g_lo = xp.exp(lam_c), xp.exp(-lam_c)
    g_dev = _per_chunk(xp.maximum(g_hi - 1.0, 1.0 - g_lo), chunk)
    tau = flush_tau(err, arith)
    g_hi_k = _per_chunk(g_hi, chunk)
    dev = g_hi_k * xp.maximum(b_hi - ref, ref - b_lo) + g_dev * ref + tau
    return WeightSystem(ref=ref, dev=dev, hi=g_hi_k * b_hi + tau, lo_sum=_lo_sum(g_lo, b_lo, starts, n, tau),
                        chunk_ref=ref, chunk_scale=xp.ones_like(g_hi), chunk_dev=None, determined=None)


def replayed(s, err, fr: Frames, chunk, starts, arith: Arithmetic) -> WeightSystem:
    """Weights with p rounded to bf16 at the chunk frame: replay RN_bf16 on each key's p interval.

    Keys whose interval rounds to one bf16 value carry no per-key width; the chunk max does not
    cancel here, so the chunk factor exp(m_c - S) carries the frame width (kept as a chunk term).
    """
    xp = array_module(s)
    n = s.shape[1]
    mc_lo, mc_hi = _per_chunk(fr.mc_lo, chunk), _per_chunk(fr.mc_hi, chunk)
    x_lo = s - err - mc_hi  # computed s_hat - m_hat_c lies in [x_lo, x_hi], both <= 0
    x_hi = xp.minimum(s + err - mc_lo, 0.0)
    shift = frame_shift(mc_lo, mc_hi)
    exact_one = (x_lo >= 0) & (shift == 0)  # the key is its chunk's computed max for sure: p = 1 exactly
    xa = -x_lo
    e = ARG_U * U32 * xa + exp_log_error(xa, 1, arith.exp) + shift
    e += F64 * (xp.abs(s) + xp.abs(mc_hi) + xp.abs(mc_lo) + 1.0)
    p_lo = xp.where(exact_one, 1.0, xp.exp(x_lo - e))
    p_hi = xp.where(exact_one, 1.0, xp.exp(x_hi + e))
    tiny = p_lo < 2 * FTZ  # the kernel's p may be subnormal or flushed
    b_lo = xp.where(tiny, 0.0, round_to(p_lo, "bf16"))
    b_hi = round_to(p_hi + xp.where(tiny, FTZ, 0.0), "bf16")
    known = b_lo == b_hi
    b_ref = xp.where(known, b_lo, round_to(xp.exp(s - _per_chunk(fr.mc, chunk)), "bf16"))
    lam_c = merge_log_error(fr, arith) + F64 * (xp.abs(fr.mc_lo) + xp.abs(fr.mc_hi) + xp.abs(fr.top) + 1.0)
    g_ref = xp.exp(fr.mc - fr.top)
    g_lo = xp.exp(fr.mc_lo - fr.top - lam_c)
    g_hi = xp.exp(fr.mc_hi - fr.top + lam_c)
    tau = flush_tau(err, arith)
    g_hi_k = _per_chunk(g_hi, chunk)
    dev = g_hi_k * xp.maximum(b_hi - b_ref, b_ref - b_lo) + tau
    return WeightSystem(ref=_per_chunk(g_ref, chunk) * b_ref, dev=dev, hi=g_hi_k * b_hi + tau,
                        lo_sum=_lo_sum(g_lo, b_lo, starts, n, tau), chunk_ref=b_ref, chunk_scale=g_ref,
                        chunk_dev=xp.maximum(g_hi - g_ref, g_ref - g_lo), determined=float(known.mean()))


@np.errstate(over="ignore", invalid="ignore")  # absurd inputs: infinite widths, never NaN ranges
def weight_systems(s, err, fr: Frames, chunk, starts, arith: Arithmetic) -> tuple[WeightSystem, WeightSystem]:
    """(numerator, denominator) systems for the declared prob_round; the same object when shared."""
    online = arith.rescales_per_key > 0
    if arith.prob_round == "none":
        w = frame_free(s, err, fr, chunk, starts, arith, bf16_p=False)
        return w, w
    if arith.prob_round == "bf16":
        w = (frame_free(s, err, fr, chunk, starts, arith, bf16_p=True) if online
             else replayed(s, err, fr, chunk, starts, arith))
        return w, w
    num = (frame_free(s, err, fr, chunk, starts, arith, bf16_p=True) if online
           else replayed(s, err, fr, chunk, starts, arith))
    return num, frame_free(s, err, fr, chunk, starts, arith, bf16_p=False)
