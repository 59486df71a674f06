"""A planted race may fault the GPU instead of writing wrong bits: a control whose kernel faults the GPU at its
planted gate is red there, and its worker ends; anywhere else (an entry, another gate, a fault that leaves the
context usable) the failure stays an error."""

from __future__ import annotations

import pytest

from kcontract.launch.base import KernelFailure
from kcontract.runner import execute


def _faulting(fatal: bool, after: int = 0):
    calls = []

    def run_gate(gate, ctx):
        calls.append(gate)
        if len(calls) > after:
            raise KernelFailure("kernel k.cu failed in call small: cudaErrorLaunchFailure", fatal=fatal)
        return execute.GateResult(gate=gate, passed=True, checked=1, bit_equal=1, decided=1)

    return run_gate, calls


def test_a_fault_at_the_planted_gate_is_red_on_the_trial_it_came(monkeypatch):
    run_gate, calls = _faulting(fatal=True, after=2)
    monkeypatch.setattr(execute, "run_gate", run_gate)
    result = execute._until_red(1, ctx=None, trials=20, faults_are_red=True)
    assert not result.passed and result.facts["faulted"] and calls == [1, 1, 1]
    assert result.message == "its kernel faulted the GPU: kernel k.cu failed in call small: cudaErrorLaunchFailure"


@pytest.mark.parametrize("fatal, planted", [(True, False), (False, True)])
def test_a_fault_elsewhere_or_one_the_context_survives_stays_an_error(monkeypatch, fatal, planted):
    run_gate, _ = _faulting(fatal=fatal)
    monkeypatch.setattr(execute, "run_gate", run_gate)
    with pytest.raises(KernelFailure):
        execute._until_red(1, ctx=None, trials=3, faults_are_red=planted)
