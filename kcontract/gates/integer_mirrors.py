"""Gate 4: integer mirrors, inputs on which all arithmetic is exact, so the output is known exactly."""

from __future__ import annotations

from kcontract.gates.base import GateResult
from kcontract.gates.context import GateContext
from kcontract.gates.ranges import range_gate

NUMBER = 4
TITLE = "integer-mirror sums"
KIND = "ranges"


def run(ctx: GateContext) -> GateResult:
    """The family's mirror cases, expectations exact up to the declared final rounding."""
    return range_gate(NUMBER, ctx)
