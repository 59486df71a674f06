"""Float64 reference and rigorous ranges for a decode call, row by row."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.bounds import decode_row_range, expected_bounds
from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Arithmetic
from kcontract.families.attention.window import chunk_of_key
from kcontract.problem import Expected

AXES = ("row", "head", "dim")


def expected_outputs(rows: list[RowData], arith: Arithmetic, scale: float) -> Expected:
    """Per-output [RN(lo), RN(hi)] for every row of a call, in the declared output format."""
    centers, los, his = [], [], []
    for row in rows:
        positions = np.arange(row.first, row.pos + 1)
        rng = decode_row_range(row.q, row.k, row.v, chunk_of_key(positions, row.first, arith.chunk), scale, arith)
        lo, hi = expected_bounds(rng.center, rng.radius, arith.out)
        centers.append(rng.center)
        los.append(lo)
        his.append(hi)
    return Expected(output="out", fmt=arith.out, lo=np.stack(los), hi=np.stack(his), center=np.stack(centers),
                    axes=AXES)
