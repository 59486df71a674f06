"""Jobs carry what a worker needs: the contract validated once by the parent, each entry's kernel exports read once
there, and each CUDA task's kernel built (decision 0039); a worker neither reads the YAML again nor compiles nor
opens a cubin but to load it, and still imports user modules afresh."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kcontract.builds import builds as builds_module
from kcontract.builds.builds import Builds
from kcontract.contract import loader
from kcontract.contract.loader import load_contract
from kcontract.errors import EnvironmentProblem
from kcontract.gatetable import records_gate
from kcontract.launch import launcher_for
from kcontract.runner.execute import execute
from kcontract.runner.job import jobs_for
from kcontract.session.plan import Selection, plan_tasks
from kcontract.toolchain import build as toolchain_build
from tests.helpers import fake_cupy
from tests.helpers.call_path import modules_entered, modules_until, route
from tests.helpers.toolchain import toolchain

ROOT = Path(__file__).resolve().parents[1]
CPU = "tests/contracts/cpu.yaml"
GATE5 = ROOT / "tests" / "contracts" / "gate5" / "contract.yaml"
ONE_GATE = Selection(only=("np_decode_d128_g4",), gate=1, case="linear_3000", no_controls=True)


def refuse(*args, **kwargs):
    raise AssertionError("a worker read what its job carries")


def test_a_job_runs_without_reading_the_contract_or_exports_again(monkeypatch):
    monkeypatch.chdir(ROOT)
    loaded = load_contract(CPU)
    tasks = plan_tasks(loaded, CPU, ONE_GATE)
    (job,) = jobs_for(loaded, tasks, Builds.of(loaded))
    monkeypatch.setattr(loader, "load_contract", refuse)
    for name in ("family_exports", "kernel", "build"):
        monkeypatch.setattr(builds_module.Builds, name, refuse)
    monkeypatch.setattr(toolchain_build, "build", refuse)
    outcome = execute(job, fresh=True)
    assert outcome.status == "ran" and outcome.gates[1].passed, outcome.detail


def test_a_job_imports_user_modules_afresh(monkeypatch):
    monkeypatch.chdir(ROOT)
    loaded = load_contract(CPU)
    tasks = plan_tasks(loaded, CPU, ONE_GATE)
    (job,) = jobs_for(loaded, tasks, Builds.of(loaded))
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
    (job,) = jobs_for(loaded, tasks, Builds.of(loaded))
    assert job.exports["tile_k"] == 64 and job.exports["m64n64_tile_m"] == 64  # a tile its schedule launches


def test_a_job_carries_its_kernel_built_for_the_sms_its_gates_need():
    """The records gate compares every target's build; a launching gate gets the GPU's target only (none where no
    GPU is named), with the cubin, the lowered names and the launch exports of that SM."""
    toolchain()
    contract = str(ROOT / "contract.yaml")
    loaded = load_contract(contract)
    builds = Builds.of(loaded)
    router = ("matmul_router_k4096_n128_fp32",)
    (records,) = plan_tasks(loaded, contract, Selection(only=router, gate=records_gate().number, no_controls=True))
    (launching,) = plan_tasks(loaded, contract, Selection(only=router, gate=1, no_controls=True))
    assert list(jobs_for(loaded, [records], builds)[0].build.modules) == loaded.targets
    (job,) = jobs_for(loaded, [launching], builds, device_sm="sm_90")
    module = job.build.on("sm_90a")
    assert list(job.build.modules) == ["sm_90a"] and Path(module.path).is_file() and not job.build.failures
    assert set(module.lowered) == set(loaded.entry("matmul_router_k4096_n128_fp32").kernel.cuda.symbols.values())
    assert job.build.exports["sm_90a"]["threads"] == 384
    assert jobs_for(loaded, [launching], builds)[0].build is None


def test_a_job_reaches_its_gate_through_three_modules(monkeypatch):
    """From execute (which the worker's loop, runner/pool.py, calls with the job it received) to the gate's kind:
    execute, the gate table's dispatch and the kind, no module between."""
    from kcontract.gates import ranges

    monkeypatch.chdir(ROOT)
    loaded = load_contract(CPU)
    (job,) = jobs_for(loaded, plan_tasks(loaded, CPU, ONE_GATE), Builds.of(loaded))
    path = modules_until(ranges.run, lambda: execute(job, fresh=True))
    assert path == ["runner/execute.py", "gates/__init__.py", "gates/ranges.py"]


def test_a_cuda_job_loads_its_cubin_through_at_most_ten_modules_and_none_of_the_toolchain(monkeypatch):
    """From execute to the cubin CuPy loads (a CuPy stand-in, no GPU needed): the stack where the gate asks for
    the kernel, then every module entered until the cubin loads; the job carries the build, so the way holds no
    module of the toolchain, the compile cache or Builds."""
    toolchain()
    fake_cupy.install(monkeypatch)
    monkeypatch.chdir(ROOT)
    loaded = load_contract("contract.yaml")
    tasks = plan_tasks(loaded, "contract.yaml", Selection(only=("rmsnorm_h4096",), gate=1, case="m1_h4096",
                                                          no_controls=True))
    (job,) = jobs_for(loaded, tasks, Builds.of(loaded), device_sm="sm_90")
    outcomes = []
    path = route(lambda: outcomes.append(execute(job)), launcher_for, fake_cupy.raw_module)
    assert "Loaded" in outcomes[0].detail and job.build.on("sm_90a").path in outcomes[0].detail  # the cubin it ran
    assert path[0] == "runner/execute.py" and path[-1] == "launch/cuda.py", path
    assert len(set(path)) <= 10, path
    assert not [m for m in path if m.startswith(("toolchain/", "builds/builds", "builds/cuda"))], path


def test_a_records_job_enters_no_module_that_compiles_or_reads_a_cubin():
    """Gate 5 in a worker compares the build its job carries: no toolchain module runs, nor Builds."""
    toolchain()
    loaded = load_contract(str(GATE5))
    tasks = plan_tasks(loaded, str(GATE5), Selection(only=("tiny",), gate=5, no_controls=True))
    (job,) = jobs_for(loaded, tasks, Builds.of(loaded))
    outcomes = []
    entered = modules_entered(lambda: outcomes.append(execute(job)))
    assert outcomes[0].status == "ran" and outcomes[0].gates[records_gate().number].checked > 0, outcomes[0].detail
    assert "records/record_check.py" in entered
    assert not [m for m in entered if m.startswith(("toolchain/", "builds/builds", "builds/cuda"))], entered


def test_the_cuda_launcher_loads_the_jobs_cubin_with_its_names_and_launch_exports(monkeypatch):
    """The launcher takes what the job carries for this GPU's target: the cubin, its symbols' lowered names, the
    shared memory its launch reads from the exports (opted in above 48 KiB), and names the toolchain that built it."""
    import hashlib

    from kcontract.launch.cuda import CudaLauncher

    toolchain()
    fake_cupy.install(monkeypatch, loads=True)
    loaded = load_contract(str(ROOT / "contract.yaml"))
    entry = loaded.entry("decode_d512_g16")
    build = Builds.of(loaded).kernel(entry.kernel.cuda, ["sm_90a"])
    launcher = CudaLauncher(loaded, entry, entry.kernel, build)
    module = build.on("sm_90a")
    assert launcher.module.path == module.path and launcher.sm == "sm_90a"
    assert {role: f.name for role, f in launcher.functions.items()} == {
        role: module.lowered[expression] for role, expression in entry.kernel.cuda.symbols.items()}
    assert launcher.smem["partials"] == build.exports["sm_90a"]["partials_smem"] > 48 * 1024
    assert launcher.functions["partials"].max_dynamic_shared_size_bytes == launcher.smem["partials"]
    assert launcher.provenance() == {"source": entry.kernel.cuda.source, "sm": "sm_90a", "toolchain": build.toolchain,
                                     "cached": module.cached,
                                     "cubin_sha256": hashlib.sha256(Path(module.path).read_bytes()).hexdigest()}
    elsewhere = Builds.of(loaded).kernel(entry.kernel.cuda, ["sm_80"])
    with pytest.raises(EnvironmentProblem, match=r"its task was built for sm_80, not for this GPU \(sm_90a\)"):
        CudaLauncher(loaded, entry, entry.kernel, elsewhere)
