"""Gate 3: split-K merges survive inputs whose chunk maxima differ wildly, with gate 1's ranges."""

from __future__ import annotations

from kcontract.gates.base import GateResult
from kcontract.gates.context import GateContext
from kcontract.gates.ranges import range_gate

NUMBER = 3
TITLE = "merge rescale"
KIND = "ranges"


def run(ctx: GateContext) -> GateResult:
    """The family's merge-stress cases."""
    return range_gate(NUMBER, ctx)
