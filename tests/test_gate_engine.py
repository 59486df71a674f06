"""The generic gate engine on hand-made problems: ranges, decided bits, NaN, zero outputs, invariance."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kcontract.contract.model import KernelRef
from kcontract.family.base import Family
from kcontract.gatetable import Suite
from kcontract.gates import invariance
from kcontract.gates.context import GateContext
from kcontract.gates.ranges import RangeTally
from kcontract.numerics import rn_bits, round_to
from kcontract.problem import Checked, Expected, InvarianceSet, OutputSpec, Problem, Reference, Variant


class FakeFamily:
    """Just enough family for GateContext: one case for every suite, the core's failure hints."""

    name = "fake"
    suites = frozenset(Suite)
    hints = Family.hints

    def cases(self, suite):
        return ["c"]


def ctx(launcher=None, family=None, control=None) -> GateContext:
    return GateContext(loaded=None, entry=SimpleNamespace(name="e"), family=family or FakeFamily(),
                       kernel=KernelRef(python="m:f"), seed=1, contract_path="x.yaml",
                       make_launcher=lambda: launcher, control=control)


def checked(lo, hi) -> Checked:
    lo, hi = round_to(np.asarray(lo, float), "bf16"), round_to(np.asarray(hi, float), "bf16")
    problem = Problem("p", {}, {"out": OutputSpec(lo.shape, "bf16")}, {})
    expected = Expected("out", "bf16", lo, hi, np.where(lo == hi, lo, 0.0), ("row", "dim"))
    return Checked("c", problem, Reference([expected]))


def tally(lo, hi, got_values) -> RangeTally:
    t = RangeTally(1)
    c = checked(lo, hi)
    t.add(c, c.compute_reference(), {"out": rn_bits(np.asarray(got_values, float), "bf16")})
    t.finish(ctx())
    return t


def test_decided_outputs_must_be_bit_equal_and_undecided_inside():
    t = tally([[1.0, 0.5]], [[1.0, 0.75]], [[1.0, 0.625]])
    r = t.result
    assert r.passed and r.checked == 2 and r.decided == 1 and r.bit_equal == 1 and r.within == 1


def test_decided_counts_per_case_where_several_cases_ran():
    t = RangeTally(1)
    for case, lo, hi in (("short", [[1.0, 0.5]], [[1.0, 0.5]]), ("long", [[1.0, 0.5]], [[1.0, 0.75]])):
        c = checked(lo, hi)
        c = Checked(case, c.problem, c.reference)
        t.add(c, c.compute_reference(), {"out": rn_bits(np.asarray([[1.0, 0.5]], float), "bf16")})
    r = t.finish(ctx())
    assert r.passed and r.facts["by_case"] == {"short": {"out": {"checked": 2, "decided": 2}},
                                                "long": {"out": {"checked": 2, "decided": 1}}}


def test_one_ulp_off_a_decided_output_fails_with_coordinates_and_replay():
    r = tally([[1.0, 2.0]], [[1.0, 2.0]], [[1.0, 2.015625]]).result
    assert not r.passed and r.failures == 1
    assert r.worst.coords == {"row": 0, "dim": 1} and "1 ulps outside" in r.worst.detail
    assert r.replay == "kcontract run --contract x.yaml --only e --gate 1 --seed 1 --case c"


def test_signed_zero_is_not_bit_equal_where_decided():
    assert not tally([[0.0]], [[0.0]], [[-0.0]]).result.passed


def test_nan_never_passes_even_in_an_unbounded_range():
    r = tally([[-np.inf]], [[np.inf]], [[np.nan]]).result
    assert not r.passed and "NaN" in r.worst.detail


def test_zero_outputs_checked_fails():
    t = RangeTally(3)
    r = t.finish(ctx())
    assert not r.passed and "zero outputs" in r.message


class FlipLauncher:
    """Returns base bits, except that batches larger than one get one bit flipped; notes what it was asked back."""

    def __init__(self):
        self.fetched = set()

    def run(self, problem):
        self.fetched.add(problem.fetch)
        out = np.full(problem.outputs["out"].shape, 0x3F80, dtype=np.uint16)
        if out.shape[0] > 1:
            out[-1, 3] ^= 1
        return {"out": out}

    def run_concurrent(self, problems):
        return [self.run(p) for p in problems]


def inv_set(batch_sizes) -> InvarianceSet:
    def prob(label, b):
        return Problem(label, {}, {"out": OutputSpec((b, 8), "bf16")}, {})

    variants = [Variant(f"b{b}", prob(f"b{b}", b), {0: b - 1}) for b in batch_sizes]
    return InvarianceSet("c", prob("base", 1), ("out",), variants, axes=("row", "dim"))


@pytest.mark.parametrize("sizes, passes", [((1,), True), ((1, 2), False)])
def test_invariance_gate_flags_any_changed_bit(sizes, passes):
    family = FakeFamily()
    family.invariance = lambda suite, case: [inv_set(sizes)]
    launcher = FlipLauncher()
    r = invariance.run(2, ctx(launcher, family))
    assert r.passed is passes
    assert r.checked == 8 * len(sizes)
    assert launcher.fetched == {("out",)}  # only the compared outputs come back from the device
    if not passes:
        assert r.worst.coords == {"row": 0, "dim": 3} and "b2" in r.worst.got
        assert any("atomics" in cause for cause in r.causes)


class NanBaseLauncher:
    """Every run writes NaN into one output of row 0 and the same bits everywhere else."""

    def run(self, problem):
        out = np.full(problem.outputs["out"].shape, 0x3F80, dtype=np.uint16)
        out[0, 2] = 0x7FFF
        return {"out": out}

    def run_concurrent(self, problems):
        return [self.run(p) for p in problems]


def test_invariance_counts_add_up_and_nan_in_the_base_fails():
    family = FakeFamily()
    family.invariance = lambda suite, case: [inv_set((1, 1, 1))]
    r = invariance.run(2, ctx(NanBaseLauncher(), family))
    assert not r.passed and r.checked == 24 and r.failures == 3 and r.bit_equal == 21
    assert r.checked == r.bit_equal + r.failures
    assert r.worst.got == "NaN or unwritten"


class CountingLauncher(FlipLauncher):
    """FlipLauncher counting its runs."""

    runs = 0

    def run(self, problem):
        self.runs += 1
        return super().run(problem)


def test_a_control_stops_at_its_first_red_variant_and_an_entry_runs_every_one():
    family = FakeFamily()
    family.cases = lambda suite: ["c", "d"]
    family.invariance = lambda suite, case: [inv_set((1, 2, 2, 2))]
    entry, control = CountingLauncher(), CountingLauncher()
    whole = invariance.run(2, ctx(entry, family))
    stopped = invariance.run(2, ctx(control, family, control="planted"))
    assert not whole.passed and entry.runs == 2 * 5 and whole.failures == 2 * 3
    assert not stopped.passed and control.runs == 3 and stopped.failures == 1  # base, b1, then the first red b2
    assert stopped.facts["stopped_at_case"] == "c" and stopped.message.endswith("stops at its first red call)")


def test_a_control_stops_its_range_gate_at_the_first_red_call():
    from kcontract.gates import ranges

    family = FakeFamily()
    family.cases = lambda suite: ["c", "d"]
    family.checks = lambda suite, case: [checked([[1.0]], [[1.0]]), checked([[1.0]], [[1.0]])]
    red = SimpleNamespace(calls=0)

    class Launcher:
        def run(self, problem):
            red.calls += 1
            return {"out": rn_bits(np.asarray([[2.0]]), "bf16")}

    r = ranges.run(1, ctx(Launcher(), family, control="planted"))
    assert not r.passed and red.calls == 1 and r.facts["stopped_at_case"] == "c"
    red.calls = 0
    assert not ranges.run(1, ctx(Launcher(), family)).passed and red.calls == 4
