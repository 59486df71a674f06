"""Gate 5: SM limits, launch checks, records and their currency, the baseline, controls, loaded attributes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.records.attributes import compare_loaded_attributes, record_row
from kcontract.records.record_check import check_records
from kcontract.sms import LIMITS, check_launch, limits_for
from kcontract.records.records import dumps
from kcontract.errors import EnvironmentProblem
from kcontract.toolchain.locate import find_toolchain

ROOT = Path(__file__).resolve().parents[1]
GATE5 = ROOT / "tests" / "contracts" / "gate5" / "contract.yaml"
TINY = ROOT / "tests" / "cuda" / "tiny.cu"
QUIET = dict(registers=32, static_smem=0, stack=0, spill_stores=0, spill_loads=0, barriers=0)

CONTRACT = """version: 1
seed: 3
targets: [sm_80, sm_86, sm_90, sm_120]
entries:
  - name: tiny
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/tiny.cu, symbols: {scale: "tiny_scale<32>", round: tiny_round}}}
    launch: {scale: {threads: 128, dynamic_smem: DYN}, round: {threads: 256}}
"""


@pytest.fixture(autouse=True)
def shared_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path_factory.getbasetemp() / "kcontract-cache"))


def project(tmp_path: Path, dynamic_smem: int = 65536) -> Path:
    """A contract with the tiny entry in a fresh directory; returns the contract path."""
    (tmp_path / "kernels").mkdir()
    shutil.copy(TINY, tmp_path / "kernels" / "tiny.cu")
    contract = tmp_path / "contract.yaml"
    contract.write_text(CONTRACT.replace("DYN", str(dynamic_smem)))
    return contract


def test_limits_table_matches_the_programming_guide():
    h200 = limits_for("sm_90a")
    assert (h200.smem_per_block_optin, h200.smem_per_sm, h200.reserved_smem_per_block) == (232448, 233472, 1024)
    assert (h200.max_threads_per_sm, h200.max_blocks_per_sm, h200.registers_per_sm) == (2048, 32, 65536)
    assert limits_for("sm_86").smem_per_block_optin == 99 * 1024
    assert limits_for("sm_80").smem_per_block_optin == 163 * 1024
    assert {sm: limits_for(sm).max_blocks_per_sm for sm in ("sm_86", "sm_89", "sm_120", "sm_121")} == \
        {"sm_86": 16, "sm_89": 24, "sm_120": 24, "sm_121": 24}
    assert {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_121"} <= set(LIMITS)
    with pytest.raises(Exception, match="no launch limits known for sm_70"):
        limits_for("sm_70")


@pytest.mark.parametrize("facts, threads, dynamic, blocks", [
    (dict(registers=12, static_smem=128, barriers=1), 128, 0, 16),
    (dict(registers=12, static_smem=128, barriers=1), 128, 65536, 3),
    (dict(registers=12, static_smem=128, barriers=1), 256, 0, 8),
    (dict(registers=12, static_smem=128, barriers=1), 1024, 0, 2),
    (dict(registers=14, static_smem=41088, barriers=1), 128, 0, 5),
    (dict(registers=14, static_smem=41088, barriers=1), 128, 65536, 2),
    (dict(registers=64, static_smem=0, barriers=0), 256, 0, 4),
    (dict(registers=64, static_smem=0, barriers=0), 1024, 0, 1),
])
def test_blocks_per_sm_agree_with_the_cuda_occupancy_api_on_sm_90(facts, threads, dynamic, blocks):
    # expected values: cuOccupancyMaxActiveBlocksPerMultiprocessor for the same functions on an sm_90 device
    check = check_launch(limits_for("sm_90"), **{**QUIET, **facts}, threads=threads, dynamic_smem=dynamic)
    assert check.blocks_per_sm == blocks and check.problems == ()


def test_launch_problems_are_named():
    over = check_launch(limits_for("sm_86"), **{**QUIET, "static_smem": 41088}, threads=128, dynamic_smem=65536)
    assert over.blocks_per_sm == 0 and over.opt_in
    assert over.problems == ("illegal launch on sm_86: shared memory 41088 static + 65536 dynamic = 106624 bytes "
                             "exceeds 101376 bytes per block (the opt-in maximum)",)
    assert check_launch(limits_for("sm_90"), **QUIET, threads=128, dynamic_smem=48 * 1024 + 1).opt_in
    assert not check_launch(limits_for("sm_90"), **QUIET, threads=128, dynamic_smem=48 * 1024).opt_in
    wide = check_launch(limits_for("sm_90"), **QUIET, threads=2048, dynamic_smem=0)
    assert "2048 threads per block (1 to 1024 allowed)" in wide.problems[0]
    heavy = check_launch(limits_for("sm_90"), **{**QUIET, "registers": 128}, threads=1024, dynamic_smem=0)
    assert "128 registers x 1024 threads exceed 65536 registers per block" in heavy.problems[0]
    spills = check_launch(limits_for("sm_90"), **{**QUIET, "stack": 456, "spill_stores": 848, "spill_loads": 892},
                          threads=128, dynamic_smem=0)
    assert spills.problems == ("spills on sm_90: 848 bytes stored, 892 bytes loaded (stack frame 456 bytes)",)


def test_committed_gate5_contract_is_current_and_both_controls_are_red():
    report = check_records(load_contract(str(GATE5)))
    assert report.errors == [] and report.notes == []
    assert report.passed and report.count("ok") == 14 and report.count("stale") == 0
    controls = {c.name: c for c in report.controls}
    stale = controls["stale_record"]
    assert stale.red and stale.stale and not stale.limits
    assert any("static_smem 128 -> 256" in line for line in stale.stale)
    over = controls["smem_over_limit"]
    assert over.red
    assert [p.split(" on ")[1].split(":")[0] for p in over.limits] == ["sm_86", "sm_89", "sm_120", "sm_121"]
    assert all("exceeds 101376 bytes per block" in p for p in over.limits)


def test_records_update_then_current_then_stale_after_a_source_change(tmp_path):
    contract = project(tmp_path)
    runner = CliRunner()
    first = runner.invoke(cli, ["records", "--update", "--contract", str(contract)])
    assert first.exit_code == 0, first.output
    assert "changed: tiny: new record (2 symbols x 4 SMs)" in first.output
    assert "changed: baseline: none -> 0 limit problems" in first.output
    record = tmp_path / "records" / find_toolchain().id / "tiny.json"
    lines = record.read_text().splitlines()
    assert sum('"sm_' in line for line in lines) == 8  # one line per symbol x SM: small diffs
    assert [line.split('"')[1] for line in lines if '"sm_' in line][:4] == ["sm_80", "sm_86", "sm_90", "sm_120"]
    again = runner.invoke(cli, ["records", "--update", "--contract", str(contract)])
    assert "records already current" in again.output
    shown = runner.invoke(cli, ["records", "--contract", str(contract)])
    assert shown.exit_code == 0 and "RECORDS cuda-13.5.37" in shown.output and "8 current, 0 stale" in shown.output
    assert "SM limits" in shown.output and "Programming Guide" in shown.output

    source = tmp_path / "kernels" / "tiny.cu"
    source.write_text(source.read_text().replace("__shared__ float tile[N];", "__shared__ float tile[2 * N];"))
    stale = check_records(load_contract(str(contract)))
    assert not stale.passed and stale.count("stale") == 8
    row = next(r for r in stale.rows if r.role == "scale" and r.sm == "sm_90")
    assert "kernels/tiny.cu (or its headers or options) changed since the record" in row.detail
    assert "static_smem 128 -> 256" in row.detail and "kcontract records --update" in row.detail
    updated = runner.invoke(cli, ["records", "--update", "--contract", str(contract)])
    assert updated.exit_code == 0
    assert "changed: tiny/scale sm_90: static_smem 128 -> 256" in updated.output
    assert check_records(load_contract(str(contract))).passed


def test_missing_and_left_over_records_fail_with_the_fix(tmp_path):
    contract = project(tmp_path)
    missing = check_records(load_contract(str(contract)))
    assert not missing.passed and missing.count("missing") == 8
    assert "run `kcontract records --update`" in missing.rows[0].detail
    check_records(load_contract(str(contract)), update=True)
    orphan = tmp_path / "records" / find_toolchain().id / "gone.json"
    orphan.write_text("{}")
    left = check_records(load_contract(str(contract)))
    assert not left.passed and "no CUDA gate-5 entry" in left.notes[0]
    redo = check_records(load_contract(str(contract)), update=True)
    assert any("gone: record removed" in line for line in redo.changes) and not orphan.exists()


def test_limit_problems_may_not_grow_past_the_baseline(tmp_path):
    contract = project(tmp_path, dynamic_smem=65536)
    check_records(load_contract(str(contract)), update=True)
    contract.write_text(CONTRACT.replace("DYN", str(100 * 1024)))
    grown = check_records(load_contract(str(contract)), update=False)
    assert len(grown.problems) == 2 and grown.baseline == 0 and not grown.passed
    assert all("illegal launch on sm_86" in p or "illegal launch on sm_120" in p for p in grown.new_problems)
    kept = check_records(load_contract(str(contract)), update=True)  # records rewritten, the baseline not grown
    assert kept.unaccepted == grown.new_problems and kept.baseline == 0 and not kept.passed
    redo = check_records(load_contract(str(contract)), update=True, accept_limits=True)
    assert "baseline: 0 -> 2 limit problems" in redo.changes
    assert redo.passed and redo.baseline == 2
    baseline = json.loads((tmp_path / "records" / "baseline.json").read_text())
    assert baseline["limit_problems"] == 2 and len(baseline["problems"]) == 2


def test_update_adds_a_new_limit_problem_to_the_baseline_only_when_asked_by_name(tmp_path):
    contract = project(tmp_path, dynamic_smem=65536)
    assert CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)]).exit_code == 0
    contract.write_text(CONTRACT.replace("DYN", str(100 * 1024)))
    kept = CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)])
    assert kept.exit_code == 1, kept.output
    assert "FAIL gate 5: new limit problem: " in kept.output and "illegal launch on sm_86" in kept.output
    assert ("note: records/baseline.json left without 2 new limit problems: fix the kernel, or accept them with "
            "`kcontract records --update --accept-limit-problems`") in kept.output, kept.output
    assert json.loads((tmp_path / "records" / "baseline.json").read_text())["limit_problems"] == 0
    accepted = CliRunner().invoke(cli, ["records", "--update", "--accept-limit-problems", "--contract",
                                        str(contract)])
    assert accepted.exit_code == 0, accepted.output
    assert "changed: baseline: 0 -> 2 limit problems" in accepted.output


def test_a_launch_sized_by_each_sms_opt_in_is_recorded_and_checked_per_sm(tmp_path):
    contract = project(tmp_path)
    per_sm = '{source: kernels/tiny.cu, symbols: {scale: "tiny_scale<32>", round: tiny_round}, ' \
             'launch: {scale: {threads: 128, dynamic_smem: "min(150000, {smem_optin} - 1024)"}}}'
    contract.write_text(CONTRACT.replace("DYN", "0").replace(
        '{source: kernels/tiny.cu, symbols: {scale: "tiny_scale<32>", round: tiny_round}}', per_sm))
    loaded = load_contract(str(contract))
    bytes_on = {"sm_80": 150000, "sm_86": 98 * 1024, "sm_90": 150000, "sm_120": 98 * 1024}  # the kernel's 128
    # static bytes fit beside
    assert loaded.entries[0].kernel.cuda.launch["scale"].dynamic_smem == bytes_on
    report = check_records(loaded, update=True)
    assert report.passed and not report.problems
    record = json.loads((tmp_path / "records" / find_toolchain().id / "tiny.json").read_text())
    assert record["kernels"]["scale"]["dynamic_smem"] == bytes_on
    assert {sm: record["kernels"]["scale"]["sms"][sm]["opt_in"] for sm in bytes_on} == dict.fromkeys(bytes_on, True)
    assert record_row(tmp_path / "records", find_toolchain().id, "tiny", "scale", "sm_86")["dynamic_smem"] == 98 * 1024
    assert check_records(load_contract(str(contract)), update=False).passed  # current, per SM
    fixed = contract.read_text().replace('"min(150000, {smem_optin} - 1024)"', "150000")
    contract.write_text(fixed)  # one size for all: illegal where 99 KB is the most a block gets
    grown = check_records(load_contract(str(contract)), update=False)
    assert sorted(p.split(": ")[1] for p in grown.new_problems) == ["illegal launch on sm_120", "illegal launch on sm_86"]


def test_a_per_sm_launch_names_the_sm_it_lacks():
    from kcontract.errors import UsageError
    from kcontract.problem import LaunchShape

    shape = LaunchShape("attend", 128, {"sm_86": 101376, "sm_90": 150000})
    assert shape.smem_on("sm_90a") == 150000 and LaunchShape("attend", 128, 4096).smem_on("sm_100") == 4096
    with pytest.raises(UsageError, match=r"none for sm_100: add sm_100 to the contract's `targets`"):
        shape.smem_on("sm_100")


def test_dumps_keeps_leaf_mappings_on_one_line():
    text = dumps({"b": 1, "a": {"sm_100": {"x": 1}, "sm_80": {"x": 2}}})
    assert text.splitlines() == ['{', '  "a": {', '    "sm_80": {"x": 2},', '    "sm_100": {"x": 1}', '  },',
                                 '  "b": 1', '}']


def test_loaded_attributes_compare_with_the_record():
    row = {"registers": 12, "static_smem": 128, "stack": 0, "threads": 128, "sm": "sm_90"}
    cupy_like = {"num_regs": 12, "shared_size_bytes": 128, "local_size_bytes": 0, "max_threads_per_block": 1024,
                 "binary_version": 90, "max_dynamic_shared_size_bytes": 49024}
    assert compare_loaded_attributes(row, cupy_like) == []
    runtime_like = {"numRegs": 12, "sharedSizeBytes": 128, "localSizeBytes": 0, "maxThreadsPerBlock": 1024}
    assert compare_loaded_attributes(row, runtime_like) == []
    wrong = compare_loaded_attributes({**row, "threads": 512}, {**cupy_like, "num_regs": 40, "local_size_bytes": 8,
                                                                "max_threads_per_block": 256, "binary_version": 80})
    assert wrong == ["registers: record 12, loaded function 40 (num_regs)",
                     "stack: record 0, loaded function 8 (local_size_bytes)",
                     "threads: the launch's 512 exceed the loaded function's max_threads_per_block 256",
                     "binary_version: loaded 80, record is for sm_90"]


def _gpu_sm() -> str | None:
    """The first GPU's SM as `sm_90`, or None without CuPy or a device."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        major, minor = cupy.cuda.Device(0).compute_capability[:-1], cupy.cuda.Device(0).compute_capability[-1]
        return f"sm_{major}{minor}"
    except Exception:
        return None


CARRIED_CACHE = "KCONTRACT_CARRIED_CACHE"  # a cache warmed on the CPU machine and carried to the GPU one


def gpu_project(tmp_path: Path, sm: str) -> Path:
    """The tiny project targeting one SM."""
    contract = project(tmp_path)
    contract.write_text(contract.read_text().replace("[sm_80, sm_86, sm_90, sm_120]", f"[{sm}]"))
    return contract


def warm(cache_dir: str, sm: str) -> None:
    """Compile the GPU test's project for `sm` into cache_dir (run on the CPU machine, then carry the folder)."""
    import os
    import tempfile

    os.environ["KCONTRACT_CACHE"] = str(Path(cache_dir).resolve())
    with tempfile.TemporaryDirectory() as folder:
        check_records(load_contract(str(gpu_project(Path(folder), sm))), update=True)


@pytest.mark.gpu
def test_loaded_function_matches_its_record_on_a_gpu(tmp_path, monkeypatch):
    sm = _gpu_sm()
    if sm is None:
        pytest.skip("no CUDA GPU (or no CuPy): the loaded-attribute check runs on a GPU machine")
    import os

    import cupy

    if os.environ.get(CARRIED_CACHE):
        monkeypatch.setenv("KCONTRACT_CACHE", str(Path(os.environ[CARRIED_CACHE]).resolve()))
    try:
        report = check_records(load_contract(str(gpu_project(tmp_path, sm))), update=True)
    except EnvironmentProblem as problem:
        pytest.skip(f"no cubin for {sm} in the cache and no pinned toolchain to compile one ({problem.message}); "
                    f"warm a cache with tests.test_records.warm(DIR, '{sm}') and set {CARRIED_CACHE}=DIR")
    if os.environ.get(CARRIED_CACHE):
        assert report.build.cached == 1, "the cubins must be the carried ones, compiled on the CPU machine"
    module = next(iter(report.build.modules.values()))
    loaded = cupy.RawModule(path=str(module.cubin_path))
    for role in ("scale", "round"):
        row = record_row(tmp_path / "records", find_toolchain().id, "tiny", role, sm)
        assert compare_loaded_attributes(row, loaded.get_function(row["mangled"]).attributes) == []


@pytest.fixture
def other_toolchain(monkeypatch):
    """This environment's NVRTC under another version, one that cannot build sm_121: a toolchain with no records."""
    import kcontract.builds.cuda
    import kcontract.session.preflight
    from dataclasses import replace

    real = find_toolchain()
    other = replace(real, nvrtc=replace(real.nvrtc, version=real.nvrtc.version + ".1"),
                    sms=tuple(s for s in real.sms if s != 121))
    for module in (kcontract.builds.cuda, kcontract.session.preflight):
        monkeypatch.setattr(module, "find_toolchain", lambda: other)
    monkeypatch.setenv("KCONTRACT_IN_PROCESS", "1")
    return other


def _gate5_copy(tmp_path: Path) -> Path:
    """tests/contracts/gate5 and the sources it names, in tmp_path (same relative layout)."""
    shutil.copytree(ROOT / "tests" / "contracts" / "gate5", tmp_path / "tests" / "contracts" / "gate5")
    shutil.copytree(ROOT / "tests" / "cuda", tmp_path / "tests" / "cuda")
    shutil.copytree(ROOT / "tests" / "families", tmp_path / "tests" / "families")
    shutil.copy(ROOT / "tests" / "__init__.py", tmp_path / "tests")
    return tmp_path / "tests" / "contracts" / "gate5" / "contract.yaml"


def test_a_toolchain_without_records_is_a_finding_and_its_controls_still_go_red(other_toolchain):
    report = check_records(load_contract(str(GATE5)))
    assert report.passed, report.errors + report.notes
    assert report.findings == [
        f"no records for {other_toolchain.id} (records exist for cuda-13.5.37): `kcontract records --update` adds "
        f"them; until then records are compared only in sources, symbols and launch shapes",
        f"nvrtc {other_toolchain.nvrtc.version} cannot build for sm_121 (contract target): skipped; a newer NVRTC "
        f"builds it"]
    assert {r.status for r in report.rows} == {"unrecorded"} and len(report.rows) == 12  # 2 symbols x 6 SMs
    controls = {c.name: c for c in report.controls}
    assert controls["stale_record"].red and all("changed since the record" in s for s in controls["stale_record"].stale)
    assert controls["smem_over_limit"].red and len(controls["smem_over_limit"].limits) == 3  # sm_121 skipped
    assert not check_records(load_contract(str(GATE5)), strict=True).passed


def test_run_counts_toolchain_findings_apart_and_strict_records_fails_them(other_toolchain):
    done = CliRunner().invoke(cli, ["run", "--contract", str(GATE5), "--gate", "5"])
    assert done.exit_code == 0, done.output
    assert ("SUMMARY 1 kernels: 1 pass gate 5, 0 fail, 0 known findings; 2 controls: 2 red as planted, 0 missed; "
            "0 limit problems; 2 toolchain findings") in done.output
    assert f"gate 5: no records for {other_toolchain.id}" in done.output
    strict = CliRunner().invoke(cli, ["run", "--contract", str(GATE5), "--gate", "5", "--strict-records"])
    assert strict.exit_code == 1, strict.output
    assert "SUMMARY 1 kernels: 0 pass gate 5, 1 fail" in strict.output and "(--strict-records)" in strict.output
    checked = CliRunner().invoke(cli, ["check", "--contract", str(GATE5), "--strict-records"])
    assert checked.exit_code == 1 and "FAIL gate 5: no records for" in checked.output


def test_a_changed_source_is_stale_against_another_toolchains_records(tmp_path, other_toolchain):
    contract = _gate5_copy(tmp_path)
    source = tmp_path / "tests" / "cuda" / "tiny.cu"
    source.write_text(source.read_text().replace("v * a;", "v * a * 2.0f;"))
    report = check_records(load_contract(str(contract)))
    assert not report.passed and report.count("stale") == 12
    assert report.rows[0].detail.endswith("records/cuda-13.5.37/tiny.json is another toolchain's: rewrite it with that "
                                          "toolchain (`kcontract records --update` there), or add this one's")


def test_records_update_adds_the_toolchains_own_records_beside_the_others(tmp_path, other_toolchain):
    contract = _gate5_copy(tmp_path)
    pinned = tmp_path / "tests" / "contracts" / "gate5" / "records" / "cuda-13.5.37" / "tiny.json"
    before = pinned.read_text()
    done = CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)])
    assert done.exit_code == 0, done.output
    own = pinned.parent.parent / other_toolchain.id / "tiny.json"
    assert own.is_file() and pinned.read_text() == before
    report = check_records(load_contract(str(contract)))
    assert report.passed and report.count("ok") == 12 and report.findings == [report.findings[-1]]  # sm_121 left
