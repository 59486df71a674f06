"""`pytest --kcontract CONTRACT`: an item per entry x gate and per control, run in kcontract's workers, failing
with kcontract's own lines, selectable by -k, -m and -x, and never taken down by a kernel that aborts or hangs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kcontract.contract.loader import load_contract
from kcontract.pytest_plugin.markers import family_marker

ROOT = Path(__file__).resolve().parents[1]
CPU = "tests/contracts/cpu.yaml"
FAULTY = "tests/contracts/faulty.yaml"


def run_pytest(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m pytest ARGS` in a fresh process, wide enough that summary lines keep kcontract's text."""
    env = {k: v for k, v in os.environ.items() if k not in ("KCONTRACT_IN_PROCESS", "PYTEST_ADDOPTS")}
    env["COLUMNS"] = "240"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          check=False, capture_output=True, text=True, timeout=timeout)


def collected(proc: subprocess.CompletedProcess) -> list[str]:
    """The node ids `--collect-only -q` listed."""
    return [line for line in proc.stdout.splitlines() if "::" in line]


def expected_ids(path: str, entry=lambda entry, gate: True, control=lambda control: True) -> list[str]:
    """The ids the contract's entries x gates and controls get, from kcontract's own loader, filtered."""
    loaded = load_contract(str(ROOT / path))
    ids = [f"{path}::{e.name}::gate{g}" for e in loaded.entries for g in sorted(e.gates) if entry(e, g)]
    return ids + [f"{path}::control::{c.name}" for c in loaded.controls if control(c)]


def no_plugin_traceback(proc: subprocess.CompletedProcess) -> None:
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text and "pytest_plugin" not in text, text[-3000:]


def test_collection_lists_every_entry_gate_and_every_control():
    proc = run_pytest("--kcontract", CPU, "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert collected(proc) == expected_ids(CPU)


def test_gate_and_family_markers_select():
    proc = run_pytest("--kcontract", CPU, "--collect-only", "-q", "-m", "gate1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert collected(proc) == expected_ids(CPU, lambda e, g: g == 1, lambda c: c.gate == 1)
    loaded = load_contract(str(ROOT / CPU))
    family = loaded.entries[-1].family_name
    families = {e.name: e.family_name for e in loaded.entries}
    marks = f"{family_marker(family)} and gate4 and not gpu"
    proc = run_pytest("--kcontract", CPU, "--collect-only", "-q", "-m", marks)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert collected(proc) == expected_ids(CPU, lambda e, g: e.family_name == family and g == 4,
                                           lambda c: families[c.entry] == family and c.gate == 4)


def test_selected_entries_and_controls_pass_with_kcontracts_lines():
    entry, control = "np_decode_d512_g16", "np_key_head_mismap"
    proc = run_pytest("--kcontract", CPU, "-k", f"{entry} and not gate2 or {control}", "-rA")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    expected = expected_ids(CPU, lambda e, g: e.name == entry and g != 2,
                            lambda c: (c.entry == entry and c.gate != 2) or c.name == control)
    assert re.search(rf"\b{len(expected)} passed\b", proc.stdout.splitlines()[-1]), proc.stdout[-2000:]
    assert re.search(rf"^{entry} gate 1 exactness vs float64: pass, \d+ checked", proc.stdout, re.MULTILINE)
    assert f"control {control} (for np_decode_d256_g3): red as planted at gate 4: " in proc.stdout
    no_plugin_traceback(proc)


def test_an_aborting_or_hanging_kernel_fails_its_item_and_pytest_goes_on(tmp_path):
    junit = tmp_path / "junit.xml"
    proc = run_pytest("--kcontract", FAULTY, "-k", "aborts and gate1 or hangs and gate1 or after and gate4",
                      f"--junitxml={junit}")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 failed, 1 passed" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]
    crash = "aborts gate 1: crashed: worker died (signal SIGABRT)"
    assert re.search(rf"^{re.escape(crash)}, [\d.]+ s$", proc.stdout, re.MULTILINE), proc.stdout
    assert f"FAILED {FAULTY}::aborts::gate1 - {crash}" in proc.stdout
    hang = "hangs gate 1: timed out: no answer within 3 s (the timeout of each gate); worker killed"
    assert re.search(rf"^{re.escape(hang)}, [\d.]+ s$", proc.stdout, re.MULTILINE), proc.stdout
    assert f'message="{crash}' in junit.read_text()
    no_plugin_traceback(proc)


def test_x_stops_at_the_first_failed_item():
    proc = run_pytest("--kcontract", FAULTY, "-x", "-k", "aborts or after")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.splitlines()[-1]
    assert "1 failed" in last and "passed" not in last, proc.stdout[-2000:]
    assert "stopping after 1 failures" in proc.stdout


def test_a_missing_contract_is_one_error_line():
    proc = run_pytest("--kcontract", "no/such/contract.yaml")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    looked = ROOT / "no/such/contract.yaml"
    expected = (f"ERROR: --kcontract no/such/contract.yaml: no such file (looked for {looked}); give the path of a "
                f"contract file, relative to {ROOT} or absolute")
    assert errors == [expected], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_an_invalid_contract_is_an_error_line_at_its_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nseed: 3\nentries:\n  - name: x\n    family: no_such_family\n"
                   "    kernel: {python: 'tests.doubles.decode:window_decode'}\n")
    proc = run_pytest("--kcontract", str(bad))
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: --kcontract {bad}: {bad}:5: entries[0].family: "), errors
    assert "Traceback" not in proc.stdout + proc.stderr


KNOWN = """version: 1
seed: 3
entries:
  - name: good
    family: attention.decode
    kernel: {python: "tests.doubles.decode:window_decode"}
    shape: {head_dim: 128, q_heads: 2, kv_heads: 1}
    stress: {chunks: 3}
    cases:
      - {name: small, cache: {kind: linear, length: 300}, rows: [299, 17]}
  - name: truncates
    family: attention.decode
    kernel: {python: "tests.doubles.controls:truncated_output"}
    shape: {head_dim: 128, q_heads: 2, kv_heads: 1}
    stress: {chunks: 3}
    cases:
      - {name: small, cache: {kind: linear, length: 300}, rows: [299, 17]}
known_findings:
  - {entry: truncates, gate: 1, reason: "rounding fix pending"}
  - {entry: good, gate: 1, reason: "fixed since"}
"""


def test_contracts_from_another_folder_and_known_findings(tmp_path):
    """A contract beside a copy of the test doubles, given relative to another folder, and one given absolute."""
    shutil.copytree(ROOT / "tests" / "doubles", tmp_path / "proj" / "doubles_copy",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "proj" / "known.yaml").write_text(KNOWN.replace("tests.doubles.", "doubles_copy."))
    proc = run_pytest("--kcontract", "proj/known.yaml", "--kcontract", str(ROOT / FAULTY), "-k",
                      "gate1 and not aborts and not hangs", "-rxX", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b3 passed, .*\b1 xfailed\b", proc.stdout.splitlines()[-1]), proc.stdout[-2000:]
    assert re.search(r"^XFAIL proj/known.yaml::truncates::gate1 - known finding: truncates gate 1 \(exactness vs "
                     r"float64\): ", proc.stdout, re.MULTILINE), proc.stdout
    assert "known finding good gate 1 passes now: remove it from known_findings in proj/known.yaml" in proc.stdout


def test_gpu_items_skip_with_the_reason_and_records_run_without_a_gpu():
    from kcontract.launch import gpu_present

    if gpu_present():
        pytest.skip("a GPU is present: its items run there")
    device, records = "tests/contracts/gpu_device.yaml", "tests/contracts/gate5/contract.yaml"
    proc = run_pytest("--kcontract", device, "--kcontract", records, "-rs")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    skipped, passed = len(expected_ids(device)), len(expected_ids(records))
    assert f"{passed} passed, {skipped} skipped" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]
    assert re.search(rf"SKIPPED \[{skipped}\] {re.escape(device)}:\d+: tests.doubles.device:window_decode needs a "
                     rf"CUDA GPU and CuPy: ", proc.stdout), proc.stdout


def test_xdist_workers_collect_and_run_the_same_items():
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    proc = run_pytest("-n", "2", "--kcontract", FAULTY, "-k", "aborts and gate1 or before")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 failed, 4 passed" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]
