"""Jobs carry what a worker needs: the contract validated once by the parent, and each entry's kernel exports read
once there; a worker neither reads the YAML again nor opens a cubin for exports, and still imports user modules
afresh."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kcontract.contract import loader
from kcontract.contract.loader import load_contract
from kcontract.runner import execute as execute_module
from kcontract.runner.execute import execute
from kcontract.runner.job import jobs_for
from kcontract.runner.plan import Selection, plan_tasks
from tests.helpers.call_path import modules_until

ROOT = Path(__file__).resolve().parents[1]
CPU = "tests/contracts/cpu.yaml"
ONE_GATE = Selection(only=("np_decode_d128_g4",), gate=1, case="linear_3000", no_controls=True)


def refuse(*args, **kwargs):
    raise AssertionError("a worker read what its job carries")


def test_a_job_runs_without_reading_the_contract_or_exports_again(monkeypatch):
    monkeypatch.chdir(ROOT)
    loaded = load_contract(CPU)
    tasks = plan_tasks(loaded, CPU, ONE_GATE)
    (job,) = jobs_for(loaded, tasks)
    monkeypatch.setattr(loader, "load_contract", refuse)
    monkeypatch.setattr(execute_module, "family_exports", refuse)
    outcome = execute(job, fresh=True)
    assert outcome.status == "ran" and outcome.gates[1].passed, outcome.detail


def test_a_job_imports_user_modules_afresh(monkeypatch):
    monkeypatch.chdir(ROOT)
    loaded = load_contract(CPU)
    tasks = plan_tasks(loaded, CPU, ONE_GATE)
    (job,) = jobs_for(loaded, tasks)
    module = loaded.entry("np_decode_d128_g4").kernel.python.partition(":")[0]
    __import__(module)
    before = sys.modules[module]
    execute(job, fresh=True)
    assert sys.modules[module] is not before  # dropped, then imported anew by the job's kernel


def test_the_parent_reads_a_cuda_entrys_exports_into_its_jobs():
    pytest.importorskip("elftools")
    loaded = load_contract(str(ROOT / "contract.yaml"))
    router = Selection(only=("matmul_router_k4096_n128_fp32",), gate=1, no_controls=True)
    tasks = plan_tasks(loaded, str(ROOT / "contract.yaml"), router)
    (job,) = jobs_for(loaded, tasks)
    assert job.exports["tile_k"] == 64 and job.exports["m64n128_tile_m"] == 64


def test_a_job_reaches_its_gate_through_three_modules(monkeypatch):
    """From execute (which the worker's loop, runner/pool.py, calls with the job it received) to the gate's kind:
    execute, the gate table's dispatch and the kind, no module between."""
    from kcontract.gates import ranges

    monkeypatch.chdir(ROOT)
    loaded = load_contract(CPU)
    (job,) = jobs_for(loaded, plan_tasks(loaded, CPU, ONE_GATE))
    path = modules_until(ranges.run, lambda: execute(job, fresh=True))
    assert path == ["runner/execute.py", "gates/__init__.py", "gates/ranges.py"]
