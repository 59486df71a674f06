"""The H200's tensor-core k-step (bf16 operands, fp32 accumulator) emulated bit for bit, and dots of k-steps."""

# One k-step d = fl_rz(c + sum of 16 exact bf16 products): every term (c included) is cut toward zero to a
# multiple of 2^(E - 25), E the largest raw exponent among the nonzero terms (a product's is the sum of its
# factors' exponents, each at least -126), the cut terms add exactly, and the sum is truncated to fp32.
# tests/oracles/mma_model.py holds the model as an exact oracle; docs/decisions/0003-tensor-core-accumulation-model.md
# records its validation on the H200 (4.9 million sums, mma.sync and wgmma alike); tests/test_tensorcore.py and
# tests/test_intervals.py check this emulation against the oracle.

from __future__ import annotations

import numpy as np

from . import fused
from .xp import array_module

KEEP_BITS = 25  # bits kept below the frame exponent
STEP = 16  # products per k-step
TERMS = 1 << 18  # products a k-step off the fused kernel forms at once (its arrays [rows, cols, 16])


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


def _exponents(x, xp):
    """Each nonzero term's raw exponent; -10**6 for a zero, which a sum of two such exponents keeps far below any
    frame (a zero factor's product is left out of it)."""
    return xp.where(x != 0, _raw_exponent(x, xp), -10**6)


def kstep(c, a, b, xp=None):
    """One k-step for many sums: c [...], a and b bf16 values (float64) that broadcast to [..., 16]; returns fp32
    values as float64. Exponents are taken of a and b as given, so operands left unbroadcast cost less."""
    xp = xp or array_module(c)
    products = a * b  # exact: bf16 x bf16 has at most 16 significant bits
    frame = xp.maximum((_exponents(a, xp) + _exponents(b, xp)).max(axis=-1), _exponents(c, xp))
    unit = xp.ldexp(xp.ones_like(c), frame - KEEP_BITS)
    with np.errstate(over="ignore", invalid="ignore"):  # a step of zero terms scales by inf: replaced by c * 0 below
        scale = xp.ldexp(xp.ones_like(c), KEEP_BITS - frame)  # 1 / unit, exact: multiplying by it is dividing
        cut = xp.trunc(products * scale[..., None]).sum(axis=-1) + xp.trunc(c * scale)  # exact integers below 2^53
    total = cut * unit
    return xp.where(frame > -10**5, _truncate_f32(total, xp), c * 0.0)


def kstep_dots(a, b, groups, xp=None, terms: int | None = None):
    """[m, n] dot products of rows a [m, K] with rows b [n, K] (bf16 values as float64) in k-steps from 0: step s
    takes the reduction indices groups[s] ([K / 16, 16]). Off the fused kernel, a tile of the dots at a time, so a
    k-step's [rows, cols, 16] arrays hold at most `terms` values (default TERMS); each dot is exact, so tiles
    change no bit."""
    xp = xp or array_module(b)
    if fused.usable(xp, a, b):
        return fused.kstep_dots(a, b, groups, KEEP_BITS)
    groups = xp.asarray(groups)
    m, n = a.shape[0], b.shape[0]
    terms = TERMS if terms is None else terms
    cols = max(1, min(n, terms // (STEP * max(m, 1))))
    rows = max(1, min(m, terms // (STEP * cols)))
    out = xp.empty((m, n))
    for i in range(0, m, rows):
        for j in range(0, n, cols):
            out[i:i + rows, j:j + cols] = _tile_dots(a[i:i + rows], b[j:j + cols], groups, xp)
    return out


def _tile_dots(a, b, groups, xp):
    """kstep_dots of one tile, each k-step over all of it at once."""
    acc = xp.zeros((a.shape[0], b.shape[0]))
    for step in range(groups.shape[0]):
        acc = kstep(acc, a[:, groups[step]][:, None, :], b[:, groups[step]][None, :, :], xp)  # [m, 1, 16], [1, n, 16]
    return acc
