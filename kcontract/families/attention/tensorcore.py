"""Replay of a kernel's tensor-core scores, bit for bit: the H200's mma k-step (probe-validated model) over the
kernel's declared grouping of head dims, so a declared order's scores carry no error (E_j = 0).

One k-step d = fl_rz(c + sum of 16 exact bf16 products): every term (c included) is cut toward zero to a
multiple of 2^(E - 25), E the largest raw exponent among the nonzero terms (a product's is the sum of its
factors' exponents, each at least -126), the cut terms add exactly, and the sum is truncated to fp32.
tools/mma/ measured it on the H200 (4.9 million sums); tests/test_tensorcore.py checks this replay against
that model.
"""

from __future__ import annotations

import numpy as np

from kcontract.numerics.xp import array_module

KEEP_BITS = 25  # bits kept below the frame exponent
STEP = 16  # products per k-step


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


def _raw_exponent(x, xp):
    """floor(log2|x|) clamped to >= -126 (0 where x == 0; those terms are left out of the frame)."""
    e = xp.frexp(x)[1].astype(xp.int32) - 1
    return xp.maximum(e, -126)


def _truncate_f32(x, xp):
    """x rounded toward zero to fp32 (subnormals kept), as float64."""
    f = x.astype(xp.float32)  # RN
    over = xp.abs(f.astype(xp.float64)) > xp.abs(x)
    toward = xp.nextafter(f, xp.zeros_like(f))
    return xp.where(over, toward, f).astype(xp.float64)


def kstep(c, a, b, xp=None):
    """One k-step for many sums: c [...], a and b [..., 16] bf16 values (float64); returns fp32 values as float64."""
    xp = xp or array_module(c)
    products = a * b  # exact: bf16 x bf16 has at most 16 significant bits
    ea, eb = _raw_exponent(a, xp), _raw_exponent(b, xp)
    pe = xp.where(products != 0, ea + eb, -10**6)
    ce = xp.where(c != 0, _raw_exponent(c, xp), -10**6)
    frame = xp.maximum(pe.max(axis=-1), ce)
    unit = xp.ldexp(xp.ones_like(c), frame - KEEP_BITS)
    with np.errstate(invalid="ignore"):  # a step of zero terms divides 0 by 0: replaced by c * 0 below
        cut = xp.trunc(products / unit[..., None]).sum(axis=-1) + xp.trunc(c / unit)  # exact integers below 2^53
    total = cut * unit
    return xp.where(frame > -10**5, _truncate_f32(total, xp), c * 0.0)


def replay_dots(q, k, xp=None, grouping: str = "decode"):
    """[G, n] tensor-core dot products of queries q [G, D] with keys k [n, D] (bf16 values as float64), k-steps
    over the head dims of `grouping` (kstep_dims) in step order."""
    xp = xp or array_module(k)
    dims = xp.asarray(kstep_dims(q.shape[1], grouping))
    acc = xp.zeros((q.shape[0], k.shape[0]))
    for step in range(dims.shape[0]):
        a = q[:, dims[step]][:, None, :]  # [G, 1, 16]
        b = k[:, dims[step]][None, :, :]  # [1, n, 16]
        acc = kstep(acc, xp.broadcast_to(a, (q.shape[0], k.shape[0], STEP)),
                    xp.broadcast_to(b, (q.shape[0], k.shape[0], STEP)), xp)
    return acc


def replay_scores(q, k, scale: float, xp=None, grouping: str = "decode"):
    """The kernel's fp32 scores RN(dot * scale) as float64: exact, for a kernel that declares this grouping."""
    xp = xp or array_module(k)
    dots = replay_dots(q, k, xp, grouping)
    return (dots.astype(xp.float32) * xp.float32(scale)).astype(xp.float64)
