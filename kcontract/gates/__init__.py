"""The gate kinds, one module each: `ranges` (gates 1, 3 and 4), `invariance` (gate 2), `records` (gate 5).

Each module's `run(number, ctx)` returns a GateResult; the gate table (kcontract.gatetable) says which kind a
number is and which family suite it runs.
"""

from __future__ import annotations

import importlib

from kcontract.gatetable import Kind, gate
from kcontract.gates.base import GateResult
from kcontract.gates.context import GateContext

RUNNERS = {Kind.RANGES: "kcontract.gates.ranges", Kind.INVARIANCE: "kcontract.gates.invariance",
           Kind.RECORDS: "kcontract.gates.records"}  # imported when a gate of its kind runs


def run_gate(number: int, ctx: GateContext) -> GateResult:
    """Run gate `number` for the context's entry (or the control standing in for it)."""
    return importlib.import_module(RUNNERS[gate(number).kind]).run(number, ctx)
