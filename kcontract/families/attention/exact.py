"""Exact expectations for integer mirrors: only the final division and output rounding may round."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention import mirrors
from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Arithmetic, Shape
from kcontract.numerics.ranges import exact_quotient_bounds
from kcontract.problem import Expected, Reference


def mirror_reference(rows: list[RowData], shape: Shape, arith: Arithmetic, miss: bool = False) -> Reference:
    """A mirror call's exact expectation (weights 0 or 1: only the division and the output rounding round);
    with `miss`, how far bf16 running sums of the first row would land (a fact for the report)."""
    lo, hi, center = [], [], []
    for row in rows:
        num, den = mirrors.mirror_sums(row, shape)
        r_lo, r_hi, exact = exact_quotient_bounds(num, np.broadcast_to(den, num.shape), arith.div, arith.out)
        lo.append(r_lo), hi.append(r_hi), center.append(exact)
    expected = Expected("out", arith.out, np.stack(lo), np.stack(hi), np.stack(center), ("row", "head", "dim"))
    notes = {}
    if miss:
        notes["bf16_accumulation_miss_ulps"] = mirrors.bf16_accumulation_miss(rows[0], shape, arith, np.stack(lo)[0])
    return Reference([expected], notes)
