"""User code that ends the process or raises an interrupt never leaves a command green: one line, a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kcontract.gates.base import GateResult
from kcontract.verdict.audit import unchecked, without_outcome
from kcontract.verdict.outcome import Outcome, Task
from kcontract.verdict.summary import Summary
from tests.helpers.cli import kcontract, no_traceback
from tests.helpers.exits import ESCAPES, drift_target, kernel_project


@pytest.mark.parametrize("command", ["list", "check", "run"])
def test_a_kernel_module_that_exits_on_import_is_refused_in_one_line(tmp_path, command):
    kernel_project(tmp_path, "import", "exit")
    done = kcontract(command, cwd=tmp_path, env={"KCONTRACT_CACHE": str(tmp_path / "cache")})
    no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "importing kern raised SystemExit(0) at" in lines[0] and "kern.py:2" in lines[0]


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_a_kernel_that_exits_in_a_call_fails_the_run_with_its_line(tmp_path, escape):
    kernel_project(tmp_path, "call", escape)
    done = kcontract("run", "--jobs", "1", cwd=tmp_path, env={"KCONTRACT_CACHE": str(tmp_path / "cache")})
    no_traceback(done)
    assert done.returncode == 1, done.stdout + done.stderr
    name = {"exit": "SystemExit(0)", "interrupt": "KeyboardInterrupt()", "generator": "GeneratorExit()"}[escape]
    assert f"kernel kern:rmsnorm in call" in done.stdout and f"raised {name} at" in done.stdout, done.stdout
    assert "SUMMARY 1 kernels: 0 pass" in done.stdout and len((done.stdout + done.stderr).splitlines()) < 12


def test_a_kernel_that_interrupts_in_process_is_its_error_not_an_interrupt(tmp_path):
    kernel_project(tmp_path, "call", "interrupt")
    done = kcontract("run", "--gate", "1", cwd=tmp_path, env={"KCONTRACT_CACHE": str(tmp_path / "cache"),
                                                               "KCONTRACT_IN_PROCESS": "1"})
    no_traceback(done)
    assert done.returncode == 1 and "raised KeyboardInterrupt() at" in done.stdout, done.stdout + done.stderr


def test_the_pytest_plugin_fails_items_whose_kernel_exits(tmp_path):
    contract = kernel_project(tmp_path, "call", "exit")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kcontract",
                           str(contract)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"KCONTRACT_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1 and "raised SystemExit(0) at" in done.stdout, done.stdout[-3000:]
    assert " passed" not in done.stdout.splitlines()[-1], done.stdout[-500:]


@pytest.mark.parametrize("at", ["import", "factory"])
def test_a_drift_target_that_exits_is_refused_not_read_as_no_drift(tmp_path, at):
    target = drift_target(tmp_path, at)
    done = kcontract("drift", target, cwd=tmp_path)
    no_traceback(done)
    assert done.returncode == 2 and "raised SystemExit(0) at" in done.stderr, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _task(name: str, gates=(1,)) -> Task:
    return Task("entry", name, name, "c.yaml", list(gates), 1)


def test_a_gate_that_passed_having_checked_nothing_is_named():
    task = _task("e", (1, 2))
    outcome = Outcome(task, gates={1: GateResult(1, True, checked=10), 2: GateResult(2, True, checked=0)})
    assert unchecked([task], [outcome]) == ["entry e gates 1, 2: gate 2 passed having checked nothing"]


def test_a_gate_with_no_result_and_a_task_with_no_outcome_are_named():
    ran, lost = _task("a", (1, 3)), _task("b")
    outcomes = without_outcome([ran, lost], [Outcome(ran, gates={1: GateResult(1, True, checked=3)}), None])
    assert outcomes[1].status == "error" and "no outcome came back" in outcomes[1].detail
    assert unchecked([ran, lost], outcomes) == ["entry a gates 1, 3: ran, but gate 3 has no result"]


def test_an_entry_whose_every_gate_skipped_and_no_task_at_all_are_named():
    first, third = _task("s", (1,)), _task("s", (3,))
    ran = Outcome(first, gates={1: GateResult(1, True, checked=5)})
    skipped = Outcome(third, gates={3: GateResult(3, True, skipped=True)})
    assert unchecked([first, third], [ran, skipped]) == []
    alone = Outcome(first, gates={1: GateResult(1, True, skipped=True)})
    assert unchecked([first, third], [alone, skipped]) == ["entry s: every gate skipped, nothing was checked"]
    assert unchecked([], []) == ["the run executed no task"]


def test_a_summary_with_anything_unchecked_fails_and_says_so():
    summary = Summary(kernels=1, passed=1, unchecked=["entry e gate 1: gate 1 passed having checked nothing"])
    assert int(summary.exit_code) == 1 and summary.line().endswith("; 1 not checked")
