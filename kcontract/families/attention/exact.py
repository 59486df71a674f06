"""Exact expectations for integer mirrors: only the final division and output rounding may round, or with per-key
normalisation each p = 1 / count and the sum of p v."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention import mirrors
from kcontract.families.attention.replay import SharedCopies
from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Arithmetic, Shape
from kcontract.numerics import U32, gamma, round_to
from kcontract.numerics.functions import DIV_ROUNDINGS
from kcontract.numerics.ranges import exact_quotient_bounds
from kcontract.problem import Expected, Reference


def mirror_reference(rows: list[RowData], shape: Shape, arith: Arithmetic, miss: bool = False) -> Reference:
    """A mirror call's exact expectation (weights 0 or 1: only the division and the output rounding round);
    with `miss`, how far bf16 running sums of the first row would land (a fact for the report)."""
    lo, hi, center = [], [], []
    copies = SharedCopies(np)  # the rows of a sequence share its keys: made float64 once
    for row in rows:
        num, den, mag = mirrors.mirror_sums(row, shape, copies)
        den = np.broadcast_to(den, num.shape)
        if arith.normalise == "per_key":
            r_lo, r_hi, exact = per_key_bounds(num, den, mag, arith.div, arith.out)
        else:
            r_lo, r_hi, exact = exact_quotient_bounds(num, den, arith.div, arith.out)
        lo.append(r_lo), hi.append(r_hi), center.append(exact)
    expected = Expected("out", arith.out, np.stack(lo), np.stack(hi), np.stack(center), ("row", "head", "dim"))
    notes = {}
    if miss:
        notes["bf16_accumulation_miss_ulps"] = mirrors.bf16_accumulation_miss(rows[0], shape, arith, np.stack(lo)[0])
    return Reference([expected], notes)


def per_key_bounds(num: np.ndarray, den: np.ndarray, mag: np.ndarray, div: str, out: str
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[lo, hi] in the output format of sum_j RN(1 / count) v_j over integer v in fp32, any order: each p is the
    division kind's quotient (IEEE: RN(1 / count) exactly), each product and partial sum rounds once."""
    exact = num / den
    if div == "ieee":
        p = round_to(1.0 / den, "fp32")
        center, width = num * p, 0.0
    else:
        p = (1.0 / den) * (1 + float(gamma(DIV_ROUNDINGS[div], U32)))
        center, width = exact, np.abs(exact) * float(gamma(DIV_ROUNDINGS[div], U32))
    radius = width + gamma(den, U32) * p * mag * (1 + 2.0**-40)  # count products and count - 1 additions
    return round_to(center - radius, out), round_to(center + radius, out), exact
