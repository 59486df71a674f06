"""The range kind (gates 1, 3 and 4): every output of a suite's problems against its per-element range.

Counts: checked = decided + undecided outputs; bit_equal counts decided outputs equal to the reference
bit for bit, within counts undecided outputs inside their range; failures = checked - bit_equal - within.
"""

from __future__ import annotations

import numpy as np

from kcontract.gates.base import GateResult, Offender
from kcontract.gates.context import GateContext
from kcontract.gates.range_verdict import trimmed, verdict
from kcontract.gatetable import Kind, gate
from kcontract.numerics import from_bits, ordered, to_bits
from kcontract.problem import Checked, Expected, Reference
from kcontract.profiling import stage, timed


def as_values(raw: np.ndarray, fmt: str) -> np.ndarray:
    """Output buffer contents as floats: bf16/fp16 bits as float64, fp32 as it is (large partials stay lean)."""
    if fmt in ("bf16", "fp16"):
        return from_bits(raw, fmt)
    raw = np.asarray(raw)
    return raw if raw.dtype == np.float32 else raw.astype(np.float64)


def as_bits(raw: np.ndarray, fmt: str) -> np.ndarray:
    """Output buffer contents as unsigned bit patterns."""
    return raw if fmt in ("bf16", "fp16") else np.asarray(raw, dtype=np.float32).view(np.uint32)


def show(value: float, bits: int, fmt: str) -> str:
    """A value with its bit pattern."""
    width = 4 if fmt in ("bf16", "fp16") else 8
    return f"{value:.8g} (0x{int(bits):0{width}x})"


class RangeTally:
    """Accumulates range checks over many problems into one GateResult."""

    def __init__(self, gate: int):
        self.result = GateResult(gate=gate, passed=True)
        self._worst_score = -1.0
        self.facts: dict[str, list] = {}
        self.by_output: dict[str, dict[str, int]] = {}  # counts per output buffer (out, part_m, ...)
        self.by_case: dict[str, dict[str, dict[str, int]]] = {}  # checked and decided per case and output
        self.causes: dict[str, None] = {}  # the failing problems' own causes, in order
        self.usual = False  # whether a failing problem has none of its own (the family's usual causes apply)

    def add(self, checked: Checked, reference: Reference, outputs: dict[str, np.ndarray]) -> None:
        """Check every expected output of one run."""
        failures = self.result.failures
        for exp in reference.expected:
            self._check(checked.case, exp, outputs[exp.output])
        if self.result.failures > failures:
            self.causes.update(dict.fromkeys(checked.causes))
            self.usual |= not checked.causes
        for key, value in (checked.notes | reference.notes).items():
            self.facts.setdefault(key, []).append(value)

    def _check(self, case: str, exp: Expected, raw: np.ndarray) -> None:
        got = as_values(raw, exp.fmt)
        got_bits = as_bits(raw, exp.fmt)
        mask = np.ones(got.shape, bool) if exp.mask is None else exp.mask
        decided = (exp.lo == exp.hi) & mask
        lo_bits, hi_bits = to_bits(exp.lo, exp.fmt), to_bits(exp.hi, exp.fmt)
        inside = (got >= exp.lo) & (got <= exp.hi) & ~np.isnan(got) & mask
        exact = decided & (got_bits == lo_bits)
        bad = mask & ~np.where(decided, exact, inside)
        counts = {"checked": int(mask.sum()), "decided": int(decided.sum()), "bit_equal": int(exact.sum()),
                  "within": int((inside & ~decided).sum()), "failures": int(bad.sum())}
        r = self.result
        for key, n in counts.items():
            setattr(r, key, getattr(r, key) + n)
            self.by_output.setdefault(exp.output, dict.fromkeys(counts, 0))[key] += n
        per_case = self.by_case.setdefault(case, {}).setdefault(exp.output, {"checked": 0, "decided": 0})
        per_case["checked"] += counts["checked"]
        per_case["decided"] += counts["decided"]
        if bad.any():
            self._offender(case, exp, got, got_bits, lo_bits, hi_bits, bad)

    def _offender(self, case, exp, got, got_bits, lo_bits, hi_bits, bad) -> None:
        """Keep the element furthest outside its range (NaN counts as furthest)."""
        g = ordered(got_bits, exp.fmt).astype(np.float64)
        dist = np.maximum(ordered(lo_bits, exp.fmt) - g, g - ordered(hi_bits, exp.fmt))
        dist = np.where(np.isnan(got), np.inf, np.maximum(dist, 0.5))  # a decided -0/+0 swap counts half an ulp
        dist = np.where(bad, dist, -1.0)
        idx = np.unravel_index(int(np.argmax(dist)), dist.shape)
        score = float(dist[idx])
        if score <= self._worst_score:
            return
        self._worst_score = score
        coords = {axis: int(i) for axis, i in zip(exp.axes, idx)}
        lo, hi = float(exp.lo[idx]), float(exp.hi[idx])
        if lo == hi:
            expected = f"{show(lo, lo_bits[idx], exp.fmt)} (decided)"
        else:
            expected = f"[{show(lo, lo_bits[idx], exp.fmt)}, {show(hi, hi_bits[idx], exp.fmt)}]"
        detail = "NaN or unwritten" if np.isnan(got[idx]) else f"{score:g} ulps outside"
        detail += f"; float64 reference {float(exp.center[idx]):.10g}; output {exp.output}"
        self.result.worst = Offender(case, coords, show(float(got[idx]), got_bits[idx], exp.fmt), expected, detail)

    def finish(self, ctx: GateContext) -> GateResult:
        """Verdict: no failures and at least one output checked. A task of one selected case keeps its counts per
        output and case whatever their number, so that a split gate's cases join (`joined`) as one run of them."""
        r = self.result
        r.facts["by_output"], r.facts["by_case"] = self.by_output, self.by_case
        for key, values in self.facts.items():
            numeric = [v for v in values if isinstance(v, (int, float))]
            if numeric and len(numeric) == len(values):
                r.facts[key] = max(numeric)
        if r.failures:
            r.causes = tuple(self.causes) + (tuple(ctx.family.hints(Kind.RANGES)) if self.usual else ())
        r.replay = ctx.replay(r.gate, r.worst.case if r.worst else None)
        return verdict(r) if ctx.case is not None else trimmed(verdict(r))


def run(number: int, ctx: GateContext) -> GateResult:
    """Launch every checked problem of each of the gate's cases, then tally it against its (cached) reference."""
    skipped = ctx.skipped(number)
    if skipped is not None:
        return skipped
    suite = gate(number).suite
    tally = RangeTally(number)
    for case in ctx.cases(number):
        for checked in timed(lambda: ctx.family.checks(suite, case), "inputs"):
            with stage("launch"):
                outputs = ctx.launcher.run(checked.problem)
            with stage("reference"):
                reference = ctx.references.reference(ctx.family, number, checked)
            with stage("compare"):
                tally.add(checked, reference, outputs)
            if ctx.stopped(tally.result, case):
                return tally.finish(ctx)
        ctx.progress(number, case)
    return tally.finish(ctx)
