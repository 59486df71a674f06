"""`kcontract check`: the CPU CI job: valid contract, every kernel registered, compiles, gate 5, receipts."""

from __future__ import annotations

import io
import json
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.capacity import usable_cores
from kcontract.sassdiff.elf import same_but_process_ids
from tests.helpers.large import many_entries, measured
from tests.helpers.receipts import gpu_receipt, write_receipt
from kcontract.toolchain import locate
from kcontract.toolchain.locate import find_toolchain

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "cuda" / "tiny.cu"
CONTRACT = """version: 1
seed: 9
targets: [sm_80, sm_90, sm_120]
entries:
  - name: tiny
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/tiny.cu, symbols: {scale: "tiny_scale<32>", round: tiny_round}}}
    launch: {scale: {threads: 128, dynamic_smem: 4096}, round: {threads: 256}}
"""


@pytest.fixture(autouse=True)
def shared_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path_factory.getbasetemp() / "kcontract-cache"))


def check(contract: Path):
    return CliRunner().invoke(cli, ["check", "--contract", str(contract)])


@pytest.fixture
def project(tmp_path) -> Path:
    """A passing project: contract, kernels/tiny.cu and current records; returns the contract path."""
    (tmp_path / "kernels").mkdir()
    shutil.copy(TINY, tmp_path / "kernels" / "tiny.cu")
    contract = tmp_path / "contract.yaml"
    contract.write_text(CONTRACT)
    done = CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)])
    assert done.exit_code == 0, done.output
    return contract


def test_the_repository_contract_passes(repository_checked, monkeypatch):
    """In the test run's cache, warm from its one check of the repository (by default `kcontract check` caches beside
    the contract; the tests write nothing inside the checkout)."""
    from kcontract.cachedir import default_root

    monkeypatch.delenv("KCONTRACT_CACHE")
    assert default_root(str(ROOT / "contract.yaml")) == ROOT / ".kcontract-cache"
    monkeypatch.setenv("KCONTRACT_CACHE", str(repository_checked))
    done = check(ROOT / "contract.yaml")
    assert done.exit_code == 0, done.output
    assert "SUMMARY check passed: contract valid" in done.output
    assert "0 unregistered" in done.output


def test_a_check_that_checks_nothing_fails():
    done = check(ROOT / "tests" / "contracts" / "cpu_nocontrols.yaml")
    assert done.exit_code == 1
    assert "FAIL nothing to check: no CUDA kernel compiled, no launch record, no control" in done.output
    assert "SUMMARY check FAILED" in done.output


def test_the_gate5_contract_passes_with_both_controls_red():
    done = check(ROOT / "tests" / "contracts" / "gate5" / "contract.yaml")
    assert done.exit_code == 0, done.output
    assert "control stale_record (gate 5, for tiny): red as planted: stale against tiny's record" in done.output
    assert "control smem_over_limit (gate 5, for tiny): red as planted: 4 limit problems (sm_86, sm_89, sm_120, " \
           "sm_121)" in done.output
    assert "gate-5 controls: 2 red as planted, 0 missed" in done.output


def test_a_current_project_passes_and_counts_its_compiles(project):
    done = check(project)
    assert done.exit_code == 0, done.output
    assert "2 __global__ in kernels/, 0 unregistered" in done.output
    assert "3 compiles (1 source x 3 SMs, 3 cached), 0 failed" in done.output
    assert "gate 5: 6 current, 0 stale, 0 missing, 0 limit problems (baseline 0)" in done.output
    assert "receipts: no receipts" in done.output


def test_jobs_auto_compiles_with_a_worker_per_usable_core_as_run_does(project, monkeypatch):
    from kcontract.toolchain import build

    asked = []
    real_run = build.run_compiles
    monkeypatch.setattr(build, "run_compiles", lambda todo, jobs: asked.append(jobs) or real_run(todo, jobs))
    (project.parent / "kernels" / "tiny.cu").write_text(TINY.read_text() + "\n// a cold compile\n")
    done = CliRunner().invoke(cli, ["check", "--contract", str(project), "--jobs", "auto"])
    assert asked == [usable_cores()], done.output
    assert "3 compiles (1 source x 3 SMs, 0 cached), 0 failed" in done.output


def test_an_unregistered_kernel_fails_by_name(project):
    (project.parent / "kernels" / "extra.cu").write_text('extern "C" __global__ void forgotten(float* x) {}\n')
    done = check(project)
    assert done.exit_code == 1
    assert "FAIL kernels/extra.cu:1: __global__ `forgotten` is registered by no entry" in done.output
    assert "kernel.cuda.symbols names it" in done.output
    assert "3 __global__ in kernels/, 1 unregistered" in done.output


def test_a_removed_record_fails_and_says_what_to_run(project):
    (project.parent / "records" / find_toolchain().id / "tiny.json").unlink()
    done = check(project)
    assert done.exit_code == 1
    assert "missing record" in done.output and "run `kcontract records --update`" in done.output


def test_a_changed_source_makes_records_stale(project):
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text().replace("v * a;", "v * a * 2.0f;"))
    done = check(project)
    assert done.exit_code == 1
    assert "stale record" in done.output and "kernels/tiny.cu (or its headers or options) changed" in done.output


def test_a_compile_error_shows_the_log_and_the_entry(project):
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text().replace("v * a;", "v * not_declared;"))
    done = check(project)
    assert done.exit_code == 1
    assert "kernels/tiny.cu does not compile for sm_80, sm_90, sm_120 (used by tiny)" in done.output
    assert 'identifier "not_declared" is undefined' in done.output


def test_a_missing_source_is_a_contract_error(project):
    project.write_text(CONTRACT.replace("kernels/tiny.cu", "kernels/absent.cu"))
    done = check(project)
    assert done.exit_code == 2
    assert "entries[0].kernel.cuda.source: an existing CUDA source" in done.output


def test_a_missing_toolchain_is_an_environment_problem_when_something_must_compile(project, monkeypatch):
    monkeypatch.setattr(locate, "nvrtc_candidates", lambda: [])
    find_toolchain.cache_clear()
    try:
        done = check(project)
    finally:
        find_toolchain.cache_clear()
    assert done.exit_code == 3
    assert done.output.startswith("ERROR: no NVRTC found: install a toolchain: pip install 'kcontract[cu13]'")
    assert len(done.output.strip().splitlines()) == 1


def test_check_names_the_toolchain_it_compiled_with(project):
    done = check(project)
    assert f"toolchain: {find_toolchain().describe()}" in done.output
    assert f"toolchain {find_toolchain().id}; receipts" in done.output


def test_check_judges_the_receipt_row_by_row(project):
    assert "receipts: no receipts" in check(project).output
    write_receipt(project, gpu_receipt(project))
    done = check(project)
    assert done.exit_code == 0, done.output
    assert "receipts: 1 receipt: 1 of 1 rows current" in done.output
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text() + "\n// touched\n")
    done = check(project)
    assert done.exit_code == 1
    assert "FAIL receipts/contract-h200.json: 1 row stale (tiny): kernels/tiny.cu changed (sha256 " in done.output
    assert "receipts: 1 receipt: 0 of 1 rows current, 1 stale" in done.output


def test_check_counts_rows_of_an_earlier_checker_and_fails_on_them_only_when_strict(project, monkeypatch):
    write_receipt(project, gpu_receipt(project))
    monkeypatch.setattr("kcontract.receipts.depends.core_digest", lambda: "0" * 64)
    done = check(project)
    assert done.exit_code == 0, done.output
    assert "note: receipts/contract-h200.json: 1 row of 1 judged by an earlier kcontract" in done.output
    assert "receipts: 1 receipt: 1 of 1 rows current; 1 judged by an earlier kcontract;" in done.output
    strict = CliRunner().invoke(cli, ["check", "--contract", str(project), "--strict"])
    assert strict.exit_code == 1 and "FAIL receipts/contract-h200.json: 1 row of 1 judged by an earlier" in strict.output


def test_a_change_to_the_checker_itself_is_reported_and_red_only_when_strict(tmp_path):
    """A copy of kcontract attests a project; editing its gates/ranges.py leaves `receipt check` green with the
    count of rows judged by an earlier kcontract, and red under --strict."""
    import os
    import subprocess
    import sys

    shutil.copytree(ROOT / "kcontract", tmp_path / "kcontract", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("families", "helpers"):
        shutil.copytree(ROOT / "tests" / folder, tmp_path / "tests" / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tests" / "__init__.py", tmp_path / "tests")
    (tmp_path / "kernels").mkdir()
    shutil.copy(TINY, tmp_path / "kernels" / "tiny.cu")
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(tmp_path)}
    make = ("from pathlib import Path; from tests.helpers.receipts import gpu_receipt, write_receipt; "
            "write_receipt(Path('contract.yaml'), gpu_receipt(Path('contract.yaml')))")
    subprocess.run([sys.executable, "-c", make], cwd=tmp_path, env=env, check=True)

    def receipt_check(*args: str):
        return subprocess.run([sys.executable, "-m", "kcontract", "receipt", "check", "--contract", "contract.yaml",
                               *args], cwd=tmp_path, env=env, capture_output=True, text=True)

    current = receipt_check()
    assert current.returncode == 0 and "1 of 1 rows current" in current.stdout, current.stdout + current.stderr
    assert "earlier" not in current.stdout
    judging = tmp_path / "kcontract" / "gates" / "base.py"  # where every gate is judged from its counts
    edited = judging.read_text().replace("r.passed = r.failures == 0 and r.checked > 0", "r.passed = True")
    assert edited != judging.read_text()
    judging.write_text(edited)
    changed = receipt_check()
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert re.search(r"note: receipts/contract-h200\.json: 1 row of 1 judged by an earlier kcontract \(core \w+, "
                     r"now \w+\): refresh them with `kcontract run --contract contract\.yaml --stale --recheck",
                     changed.stdout), changed.stdout
    strict = receipt_check("--strict")
    assert strict.returncode == 1 and "FAIL receipts/contract-h200.json: 1 row of 1 judged by an earlier" in strict.stdout


def test_two_thousand_entries_check_list_and_run_one_each_in_two_seconds_and_300_mb(tmp_path):
    """CPU seconds, its workers' included: other work on a busy machine stretches the wall time, not these."""
    many_entries(tmp_path, 2000)
    env = {"KCONTRACT_CACHE": str(tmp_path / "cache")}
    assert measured("check", "--contract", "large.yaml", cwd=tmp_path, env=env).code == 0  # warms the cache
    for args in (("check",), ("list",), ("run", "--only", "rms_1234", "--gate", "1", "--no-controls", "--jobs", "1")):
        done = measured(*args, "--contract", "large.yaml", cwd=tmp_path, env=env)
        assert done.code == 0, done.output[-2000:]
        assert done.cpu < 2 and done.peak_mb < 300, f"{args[0]}: {done.cpu:.1f} s CPU, {done.peak_mb:.0f} MB"


def _cached_cubin(cache: Path, label: str, sm: str) -> Path:
    """The cubin the compile cache holds for `label` on `sm`."""
    for meta in cache.glob("*/*/meta.json"):
        facts = json.loads(meta.read_text())["facts"]
        if facts["label"] == label and facts["sm"] == sm:
            return meta.parent / "module.cubin"
    raise AssertionError(f"no cached module of {label} for {sm} in {cache}")


def test_a_cold_check_says_each_batch_of_compiles_on_stderr(project, tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cold"))
    done = check(project)
    assert done.exit_code == 0, done.output
    assert "compile: 3 modules to compile" in done.stderr
    assert re.search(r"compile: kernels/tiny\.cu for 3 SMs \(3 of 3 compiles, \d+ s\)", done.stderr), done.stderr
    assert "compile:" not in check(project).stderr  # warm: nothing to compile, nothing said


def test_recompile_compiles_every_module_afresh_and_finds_the_cache_as_it_was(project):
    done = CliRunner().invoke(cli, ["check", "--contract", str(project), "--recompile"])
    assert done.exit_code == 0, done.output
    assert re.search(r"3 compiles \(1 source x 3 SMs, 0 cached; 3 recompiled: (\d) bit-identical, (\d) the same but "
                     r"for internal symbols' process ids, 0 the same machine code, 0 new to the cache, 0 unlike the "
                     r"cache\), 0 failed", done.output), done.output


def test_recompile_names_a_cached_cubin_that_its_key_does_not_compile_to(project, tmp_path, monkeypatch):
    """What the cache holds is trusted by its key; --recompile proves it, and names a module it cannot."""
    source = project.parent / "kernels" / "tiny.cu"
    original = source.read_text()
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "other"))
    source.write_text(original.replace("v * a;", "v * a * 2.0f;"))
    check(project)  # another kernel's modules, in a cache of their own
    other = _cached_cubin(tmp_path / "other", "kernels/tiny.cu", "sm_90").read_bytes()
    source.write_text(original)
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    assert check(project).exit_code == 0
    cubin = _cached_cubin(tmp_path / "cache", "kernels/tiny.cu", "sm_90")
    fresh = cubin.read_bytes()
    cubin.write_bytes(other)  # another kernel's machine code under this key
    assert check(project).exit_code == 0  # trusted by its key: not compiled again
    done = CliRunner().invoke(cli, ["check", "--contract", str(project), "--recompile"])
    assert done.exit_code == 1
    assert "FAIL kernels/tiny.cu on sm_90: recompiled, it is not what the cache held under its key" in done.output
    assert "its machine code differs; the fresh module replaced it" in done.output
    assert "0 new to the cache, 1 unlike the cache" in done.output
    assert not same_but_process_ids(other, fresh) and same_but_process_ids(cubin.read_bytes(), fresh)  # put back


def test_two_compiles_of_one_source_differ_only_in_the_process_id_nvrtc_names_internal_symbols_with():
    """What --recompile allows beside bit-identity: two processes compiling the same inputs give cubins whose
    sections and symbols agree byte for byte but for digits in internal symbols' names."""
    tool = find_toolchain()
    source = ROOT / "kernels" / "window_decode.cu"
    job = ("key", str(tool.nvrtc.path), source.read_bytes(), str(source), ("window_decode_merge<128, 4>",),
           "sm_80", (), (str(source.parent), str(tool.headers.path)))
    cubins = [subprocess.run([sys.executable, "-m", "tests.helpers.compile_once"], input=pickle.dumps(job),
                             capture_output=True, check=True, cwd=ROOT).stdout for _ in range(2)]
    assert cubins[0] != cubins[1] and same_but_process_ids(*cubins)


def test_compile_progress_is_a_line_per_batch_and_heartbeat_when_piped_and_a_bar_in_a_terminal(monkeypatch):
    from rich.console import Console

    from kcontract.commands import compiling
    from kcontract.toolchain.build import Batch

    batches = [Batch("", 0, 0, 0, 3), Batch("a.cu", 1, 2, 1, 3), Batch("a.cu", 2, 2, 2, 3), Batch("b.cu", 1, 1, 3, 3)]
    piped, shown = io.StringIO(), io.StringIO()
    monkeypatch.setattr(compiling, "HEARTBEAT", 1e9)  # a line per batch only
    lines = compiling.CompileProgress(Console(file=piped, force_terminal=False, width=200))
    for batch in batches:
        lines(batch)
    assert [re.sub(r", \d+ s\)", ")", line) for line in piped.getvalue().splitlines()] == [
        "compile: 3 modules to compile", "compile: a.cu for 2 SMs (2 of 3 compiles)",
        "compile: b.cu for 1 SM (3 of 3 compiles)"]
    monkeypatch.setattr(compiling, "HEARTBEAT", 0.0)  # and one whenever the heartbeat is due
    beating = io.StringIO()
    heart = compiling.CompileProgress(Console(file=beating, force_terminal=False, width=200))
    for batch in batches[:2]:
        heart(batch)
    assert "compile: a.cu 1 of 2 SMs so far (1 of 3 compiles" in beating.getvalue()
    bar = compiling.CompileProgress(Console(file=shown, force_terminal=True, width=200))
    for batch in batches[:3]:
        bar(batch)
    assert bar.bar is not None and bar.bar.tasks[0].completed == 2 and bar.bar.tasks[0].total == 3
    bar(batches[3])
    assert bar.bar is None and "compile:" not in shown.getvalue()
