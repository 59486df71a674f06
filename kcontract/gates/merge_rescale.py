"""Gate 3: split-K merges survive chunk maxima tens of nats apart, with gate 1's ranges."""

from __future__ import annotations

from kcontract.gates.base import GateResult
from kcontract.gates.context import GateContext
from kcontract.gates.ranges import range_gate

NUMBER = 3
TITLE = "merge rescale"


def run(ctx: GateContext) -> GateResult:
    """The family's merge-stress inputs."""
    return range_gate(NUMBER, ctx, ctx.family.merge_stress())
