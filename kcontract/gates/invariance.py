"""The invariance kind (gate 2): a row's bits do not depend on the batch, its slot, the problem's size, the split,
concurrency or the run.

Counts: every mapped row of every variant is compared with the base run, output by output; checked =
outputs compared, bit_equal = compared outputs whose bits match a finite base value, failures = the rest
(changed bits, or NaN in the base run), so checked = bit_equal + failures.
"""

from __future__ import annotations

import numpy as np

from kcontract.gates.base import GateResult, Offender, judged
from kcontract.gates.context import GateContext
from kcontract.gates.ranges import as_bits
from kcontract.gatetable import Kind, gate
from kcontract.problem import InvarianceSet
from kcontract.profiling import stage, timed

def run(number: int, ctx: GateContext) -> GateResult:
    """Compare every variant's mapped rows with the base run, bit for bit."""
    skipped = ctx.skipped(number)
    if skipped is not None:
        return skipped
    suite = gate(number).suite
    result = GateResult(gate=number, passed=True)
    variants_run = 0
    for case in ctx.cases(number):
        for inv in timed(lambda: ctx.family.invariance(suite, case), "inputs"):
            variants_run += _check_set(ctx, inv, result)
            if inv.orders is not None:
                told, of, alike = inv.orders
                result.facts.setdefault("order_probes", {})[case] = {"told_apart": told, "of": of, "alike": list(alike)}
            if ctx.stopped(result, case):
                break
        ctx.progress(number, case)
        if "stopped_at_case" in result.facts:
            break
    result.facts["variants"] = variants_run
    judged(result, "outputs changed bits across runs or were NaN")
    if result.failures:
        result.causes = tuple(ctx.family.hints(Kind.INVARIANCE))
    result.replay = ctx.replay(number, result.worst.case if result.worst else None)
    return result


def _check_set(ctx: GateContext, inv: InvarianceSet, result: GateResult) -> int:
    """Run the base and each variant; tally compared outputs into result; return the variants run."""
    inv.base.fetch = inv.outputs  # only compared outputs come back (a batch of 64's partials would not fit)
    with stage("launch"):
        base = ctx.launcher.run(inv.base)
    nan = {name: _nan_mask(base[name], inv.base.outputs[name].fmt) for name in inv.outputs}
    for name, mask in nan.items():
        if mask.any() and result.worst is None:
            idx = np.unravel_index(int(np.argmax(mask)), mask.shape)
            result.worst = Offender(inv.case, _coords(inv.axes, idx), "NaN or unwritten", "a finite value",
                                    f"{int(mask.sum())} outputs NaN in the base run {inv.base.label}")
    count = 0
    for variant in timed(lambda: inv.variants, "inputs"):
        count += 1
        variant.problem.fetch = inv.outputs
        if variant.concurrent_with is not None:
            variant.concurrent_with.fetch = ()
        with stage("launch"):
            if variant.concurrent_with is not None:
                got = ctx.launcher.run_concurrent([variant.problem, variant.concurrent_with])[0]
            else:
                got = ctx.launcher.run(variant.problem)
        with stage("compare"):
            _compare(inv, variant, base, got, nan, result)
        del variant, got  # one variant's buffers at a time
        if ctx.stops_at_red and result.failures:
            break
    return count


def _compare(inv: InvarianceSet, variant, base: dict, got: dict, nan: dict, result: GateResult) -> None:
    """Tally one variant's mapped rows against the base run."""
    for name in inv.outputs:
        fmt = inv.base.outputs[name].fmt
        want, have = as_bits(base[name], fmt), as_bits(got[name], fmt)
        for b, vb in variant.row_map.items():
            bad = (want[b] != have[vb]) | nan[name][b]
            result.checked += bad.size
            result.bit_equal += int((~bad).sum())
            result.failures += int(bad.sum())
            changed = want[b] != have[vb]
            if changed.any() and (result.worst is None or result.worst.got == "NaN or unwritten"):
                idx = (b,) + np.unravel_index(int(np.argmax(changed)), changed.shape)
                result.worst = Offender(
                    inv.case, _coords(inv.axes, idx), f"0x{int(have[vb][idx[1:]]):04x} in {variant.label}",
                    f"0x{int(want[idx]):04x} in {inv.base.label}",
                    f"{int(changed.sum())} of {changed.size} outputs of this row differ (row at index {vb})")


def _nan_mask(raw: np.ndarray, fmt: str) -> np.ndarray:
    """NaN elements of an output buffer."""
    if fmt == "bf16":
        return (raw & 0x7F80 == 0x7F80) & (raw & 0x007F != 0)
    if fmt == "fp16":
        return (raw & 0x7C00 == 0x7C00) & (raw & 0x03FF != 0)
    return np.isnan(raw)


def _coords(axes: tuple[str, ...], idx: tuple) -> dict[str, int]:
    """Named coordinates of an output index (axis i when unnamed)."""
    names = list(axes) + [f"axis{i}" for i in range(len(axes), len(idx))]
    return {name: int(i) for name, i in zip(names, idx)}
