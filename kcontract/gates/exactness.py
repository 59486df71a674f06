"""Gate 1: every output inside its rigorous float64 range; bit-equal where the range is decided."""

from __future__ import annotations

from kcontract.gates.base import GateResult
from kcontract.gates.context import GateContext
from kcontract.gates.ranges import range_gate

NUMBER = 1
TITLE = "exactness vs float64"
KIND = "ranges"


def run(ctx: GateContext) -> GateResult:
    """Realistic inputs for every case."""
    return range_gate(NUMBER, ctx)
