"""Generic gates 1-4, one module each; each module defines NUMBER, TITLE and run(ctx)."""

from __future__ import annotations

from kcontract.gates import exactness, integer_mirrors, invariance, merge_rescale

GATES = {m.NUMBER: m for m in (exactness, invariance, merge_rescale, integer_mirrors)}
