"""Rigorous error bounds of sums and dot products accumulated in tensor-core k-steps, for any k-step order."""

# One k-step (tensorcore.py) cuts each of its 17 terms (16 products and the accumulator c) to a multiple of
# 2^(E - 25), 2^E at most the largest term, and truncates the sum to fp32: its error is below
# (17 2^-25 + 2^-23) (1 + 2^-20) A, A = |c| plus the step's |terms|, which is at most the running absolute sum of
# every term so far. An fp32 operand goes in as three bf16 parts (hi, mid, lo; their magnitudes add to at most
# (1 + 2^-7) of it), a bf16 operand as one; n consecutive terms of a block touch at most ceil(n / 16) + 1 k-steps
# of 16 aligned terms (a k-step of zero terms leaves c exact).

from __future__ import annotations

import math

import numpy as np

from .bounds import U32
from .formats import fmt as as_format
from .fp32 import fp32_at_least, fp32_at_most
from .tensorcore import STEP
from .xp import array_module

CUT = 2.0**-25  # one term's cut, relative to the step's largest term
RZ = 2.0**-23  # the fp32 truncation, relative to the step's result
PER_STEP = (17 * CUT + RZ) * (1 + 2.0**-20) * (1 + 2.0**-6)  # per k-step, relative to the block's sum of |a b|
# bits a k-step keeps below its largest term's leading bit, as order-free bounds assume: one fewer than the model's
# KEEP_BITS (docs/kernel-contract.md 2.2; tests/oracles/mma_model.py holds the model, and
# docs/decisions/0003-tensor-core-accumulation-model.md its validation on the H200)
MMA_KEEP_BITS = 24
_PARTS = {"bf16": 1, "fp32": 3}  # bf16 parts that hold an operand exactly: hi, mid and lo for fp32


def bf16_parts(fmt: str) -> int:
    """k-steps per 16 terms for an operand in fmt: three bf16 parts for fp32, one for bf16."""
    name = as_format(fmt).name
    if name not in _PARTS:
        raise ValueError(f"k-step operands in bf16 or fp32, given: {name}")
    return _PARTS[name]


def touched_steps(terms: int, block: int) -> int:
    """k-steps `terms` consecutive terms of a block of `block` terms can touch."""
    return min(block // STEP, math.ceil(terms / STEP) + 1) if terms > 0 else 0


def kstep_sum_error(terms: int, block: int, parts: int) -> float:
    """|sum_hat - sum a b| over `terms` consecutive terms of a block, relative to sum |a b|: every k-step's cut and
    truncation, for an operand in `parts` bf16 parts."""
    return parts * touched_steps(terms, block) * PER_STEP


def chained_dot_error(length: int) -> float:
    """k / (1 - k), k = ceil(length / 16) (16 2^-F + 2u): a dot product's error in chained k-steps, relative to B.

    B bounds every product and every exact partial sum (the larger of the positive and the negative products'
    sums, for one). Per k-step each of the 16 terms that is not the largest loses less than 2^-F of the largest's
    binade (F = MMA_KEEP_BITS) and the result less than one fp32 ulp (2u of it); every term and every partial sum
    is at most B plus the error so far, so the error is at most k / (1 - k) B.
    """
    k = -(-length // STEP) * (STEP * 2.0**-MMA_KEEP_BITS + 2 * U32)
    return k / (1.0 - k)


def kstep_interval(lo, hi, a_lo, a_hi, b, parts: int, axis: int = -2):
    """[lo, hi] of an fp32 accumulator in [lo, hi] after one k-step adding the products a b along `axis`: a in
    [a_lo, a_hi] as `parts` bf16 parts (a k-step each), b bf16 values.

    The k-step is not monotone in a term (a term crossing a power of two coarsens the others' cut), so it is not
    evaluated at interval ends: the step's exact sum over the products' extremes is widened by 17 cuts of its
    largest term (for every part after the first that is the accumulator, at most the running absolute sum) and
    one fp32 truncation per part, and the ends are then pulled in to fp32 values (the accumulator is one). A
    k-step whose 16 products are all zero leaves the accumulator exact.
    """
    xp = array_module(lo)
    x, y = a_lo * b, a_hi * b  # exact products
    t_lo, t_hi = xp.minimum(x, y).sum(axis=axis), xp.maximum(x, y).sum(axis=axis)  # the sums of their ends
    abs_x = xp.abs(x)
    mag = xp.maximum(abs_x, xp.abs(y))  # the ends' magnitudes
    del y
    if parts > 1:
        mag *= 1.0 + 2.0**-8  # the hi part exceeds a by at most 2^-9 relative
    acc = xp.maximum(xp.abs(lo), xp.abs(hi))
    step = mag.sum(axis=axis)
    largest = xp.maximum(mag.max(axis=axis), acc)
    del mag
    total = (acc + step * (1 + 2.0**-7)) * (1 + 2.0**-20)  # at least |c| and |result| after every part
    tiny = 2.0**-130 * xp.abs(b).max(axis=axis)  # subnormal a: a coarser cut, a last part below bf16's range
    err = ((STEP + 1) * (CUT * (largest + (parts - 1) * total) + parts * tiny)
           + parts * RZ * total + 2.0**-50 * total)
    err = xp.where(step > 0, err, 0.0)
    new_lo, new_hi = fp32_at_least(lo + t_lo - err), fp32_at_most(hi + t_hi + err)
    point, value = _exact_step(lo, hi, a_lo, a_hi, x, abs_x, parts, axis)
    return xp.where(point, value, new_lo), xp.where(point, value, new_hi)


def _exact_step(lo, hi, a_lo, a_hi, terms, abs_terms, parts: int, axis: int):
    """Where a k-step is known exactly: the accumulator and every term are points (a in bf16, so its later parts
    are zero), every term and the accumulator are multiples of 2^(E - 25) for the largest one's binade 2^E (no
    cut loses a bit), and their exact sum is an fp32 value (the truncation loses none). Returns (mask, sum)."""
    xp = array_module(lo)
    point = (lo == hi) & xp.all(a_lo == a_hi, axis=axis)
    if parts > 1:
        point &= xp.all(a_lo.astype(xp.float32).view(xp.uint32) & 0xFFFF == 0, axis=axis)
    largest = xp.maximum(abs_terms.max(axis=axis), xp.abs(lo))
    _, above = xp.frexp(largest)  # largest < 2^above: its binade 2^E is 2^(above - 1)
    unit = xp.ldexp(xp.full(above.shape, 2.0**26), -above)  # 2^-(E - 25): the grid scaled to the integers
    with np.errstate(invalid="ignore"):
        on_grid = xp.all(_integers(terms * xp.expand_dims(unit, axis)), axis=axis) & _integers(lo * unit)
    total = lo + terms.sum(axis=axis)  # exact: at most 17 multiples of the grid below 2^(E + 1)
    point &= on_grid & (total.astype(xp.float32).astype(xp.float64) == total) & xp.isfinite(total)
    return point, total


def _integers(x):
    """Where x is an integer: a term times 2^-(E - 25) is one exactly where the term is on the grid (a power-of-two
    scaling, exact far from float64's range ends)."""
    return x == array_module(x).trunc(x)
