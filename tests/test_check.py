"""`kcontract check`: the CPU CI job: valid contract, every kernel registered, compiles, gate 5, receipts."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.identity import file_sha256
from kcontract.receipts import check_receipts
from kcontract.report.receipt import build_receipt
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


def test_the_repository_contract_passes(monkeypatch):
    """With the cache beside the contract, as `kcontract check` uses it (warm after README's first command)."""
    monkeypatch.delenv("KCONTRACT_CACHE")
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
    assert "3 compiles (1 sources x 3 SMs, 3 cached), 0 failed" in done.output
    assert "gate 5: 6 current, 0 stale, 0 missing, 0 limit problems (baseline 0)" in done.output
    assert "receipts: no receipts" in done.output


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


def gpu_receipt(contract: Path) -> dict:
    """A receipt of the contract as a GPU run would write it (no GPU needed to build one)."""
    receipt = build_receipt(load_contract(str(contract), import_kernels=False), {"summary": "SUMMARY ...",
                                                                                "exit_code": 0, "entries": [],
                                                                                "controls": []},
                            seed=9, wall_s=1.0, gpu=False)
    receipt["device"] = "gpu"
    return receipt


def write_receipt(contract: Path, receipt: dict, name: str = "contract-h200.json") -> Path:
    (contract.parent / "receipts").mkdir(exist_ok=True)
    path = contract.parent / "receipts" / name
    path.write_text(json.dumps(receipt))
    return path


def receipts_of(contract: Path):
    return check_receipts(load_contract(str(contract), import_kernels=False))


def test_receipts_current_and_stale(project):
    assert receipts_of(project).summary() == "no receipts"
    receipt = gpu_receipt(project)
    assert "kernels/tiny.cu" in receipt["sources"] and "contract.yaml" in receipt["sources"]
    write_receipt(project, receipt)
    assert receipts_of(project).summary() == "1 receipt current"
    assert "receipts: 1 receipt current" in check(project).output
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text() + "\n// touched\n")
    stale = receipts_of(project)
    assert not stale.passed and stale.summary() == "1 of 1 receipts stale or invalid"
    assert stale.stale == [f"receipts/contract-h200.json: kernels/tiny.cu changed since the receipt (sha256 "
                           f"{receipt['sources']['kernels/tiny.cu'][:12]}, now {file_sha256(source)[:12]}): "
                           f"rerun `kcontract run --contract contract.yaml --receipt receipts/contract-h200.json` on "
                           f"a GPU and commit it"]
    done = check(project)
    assert done.exit_code == 1 and "kernels/tiny.cu changed since the receipt" in done.output


def test_a_receipt_is_stale_when_the_checker_changes(project, monkeypatch):
    write_receipt(project, gpu_receipt(project))
    assert receipts_of(project).passed
    monkeypatch.setattr("kcontract.receipts.core_digest", lambda: "0" * 64)
    stale = receipts_of(project)
    assert not stale.passed and "made by another kcontract core" in stale.stale[0]


@pytest.mark.parametrize("change, why", [
    (lambda r: r.update(sources={}), "lists no sources"),
    (lambda r: r.pop("sources"), "lists no sources"),
    (lambda r: r["covers"].update(entries=3), "covers 3 entries and 0 controls, contract.yaml has 1 and 0"),
    (lambda r: r["covers"].update(partial=True), "(a partial run)"),
    (lambda r: r.update(device="cpu"), "ran on cpu, and contract.yaml has CUDA kernels"),
    (lambda r: r.update(kind="other"), "not a kcontract receipt"),
    (lambda r: r.update(exit_code=1, summary="SUMMARY 1 kernels: 0 pass"), "exit code 1: SUMMARY 1 kernels: 0 pass"),
    (lambda r: r.pop("exit_code"), "records a run that did not pass (exit code None"),
])
def test_invalid_receipts_fail(project, change, why):
    receipt = gpu_receipt(project)
    change(receipt)
    write_receipt(project, receipt)
    report = receipts_of(project)
    assert not report.passed and any(why in line for line in report.stale), report.stale
    assert check(project).exit_code == 1


def test_a_required_receipt_must_exist(project):
    project.write_text(project.read_text().replace("seed: 9", "seed: 9\nrequire_receipt: true"))
    report = receipts_of(project)
    assert not report.passed and "requires a receipt and no current one covers it" in report.stale[0]
    write_receipt(project, gpu_receipt(project))
    assert receipts_of(project).passed


def test_receipt_check_reads_receipts_beside_its_contract(project, tmp_path_factory, monkeypatch):
    write_receipt(project, gpu_receipt(project))
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)
    done = CliRunner().invoke(cli, ["receipt", "check", "--contract", str(project)])
    assert done.exit_code == 0 and "1 receipt current" in done.output
    default = CliRunner().invoke(cli, ["receipt", "check"])
    assert default.exit_code == 2 and "contract.yaml: no such file" in default.output


def test_a_malformed_receipt_fails(project):
    (project.parent / "receipts").mkdir()
    (project.parent / "receipts" / "bad.json").write_text('{"sources": 3')
    done = check(project)
    assert done.exit_code == 1 and "receipts/bad.json: not valid JSON" in done.output


def test_receipt_check_goes_red_when_the_checker_itself_changes(tmp_path):
    """A copy of kcontract attests a project; editing its gates/ranges.py makes `receipt check` fail."""
    import os
    import subprocess
    import sys

    shutil.copytree(ROOT / "kcontract", tmp_path / "kcontract", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests" / "families", tmp_path / "tests" / "families",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tests" / "__init__.py", tmp_path / "tests")
    (tmp_path / "kernels").mkdir()
    shutil.copy(TINY, tmp_path / "kernels" / "tiny.cu")
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(tmp_path)}
    make = ("import json; from kcontract.contract.loader import load_contract; "
            "from kcontract.report.receipt import build_receipt; "
            "r = build_receipt(load_contract('contract.yaml', import_kernels=False), "
            "{'summary': 'SUMMARY', 'exit_code': 0, 'entries': [], 'controls': []}, seed=9, wall_s=1.0, "
            "gpu=False); "
            "r['device'] = 'gpu'; import pathlib; pathlib.Path('receipts').mkdir(); "
            "pathlib.Path('receipts/contract-h200.json').write_text(json.dumps(r))")
    subprocess.run([sys.executable, "-c", make], cwd=tmp_path, env=env, check=True)

    def receipt_check():
        return subprocess.run([sys.executable, "-m", "kcontract", "receipt", "check", "--contract", "contract.yaml"],
                              cwd=tmp_path, env=env, capture_output=True, text=True)

    current = receipt_check()
    assert current.returncode == 0 and "1 receipt current" in current.stdout, current.stdout + current.stderr
    ranges = tmp_path / "kcontract" / "gates" / "ranges.py"
    ranges.write_text(ranges.read_text().replace("r.passed = r.failures == 0 and r.checked > 0", "r.passed = True"))
    stale = receipt_check()
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert re.search(r"made by another kcontract core \(sha256 \w+, now \w+; changed: kcontract/gates/ranges\.py\)",
                     stale.stdout), stale.stdout
