"""End to end on CPU: the shipped contract's SUMMARY, every control red at its gate, faults isolated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def kcontract(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "kcontract", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_cpu_contract_passes_and_every_control_is_red_at_its_gate(tmp_path):
    report = tmp_path / "run.json"
    proc = kcontract("run", "--contract", "tests/contracts/cpu.yaml", "--jobs", "2", "--json", str(report))
    contract = yaml.safe_load((ROOT / "tests/contracts/cpu.yaml").read_text())
    n, c = len(contract["entries"]), len(contract["controls"])
    summary = (f"SUMMARY {n} kernels: {n} pass gates 1-4, 0 fail, 0 known findings; {c} controls: "
               f"{c} red as planted, 0 missed; 0 limit problems")
    assert summary in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0
    doc = json.loads(report.read_text())
    planted = {ctl["name"]: ctl["gate"] for ctl in contract["controls"]}
    for ctl in doc["controls"]:
        red = [int(g) for g, r in ctl["gates"].items() if not r["passed"]]
        assert planted[ctl["task"]["name"]] in red, (ctl["task"]["name"], red)
    for entry in doc["entries"]:
        for gate, result in entry["gates"].items():
            assert result["passed"] and result["checked"] > 0, (entry["task"]["name"], gate)
    print("\n" + summary)


def test_repository_contract_runs_on_cpu():
    proc = kcontract("run", "--contract", "contract.yaml", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SUMMARY 1 kernels: 1 pass gates 1-4, 0 fail" in proc.stdout


def test_aborting_and_hanging_kernels_are_reported_and_the_run_goes_on():
    proc = kcontract("run", "--contract", "tests/contracts/faulty.yaml", timeout=300)
    assert proc.returncode == 1
    assert ("SUMMARY 4 kernels: 2 pass gates 1-4, 2 fail, 0 known findings; 0 controls: 0 red as planted, "
            "0 missed; 0 limit problems") in proc.stdout, proc.stdout + proc.stderr
    assert "aborts: crashed: worker died (signal SIGABRT)" in proc.stderr
    assert "hangs: timed out: no answer within 8 s" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_kernel_module_that_cannot_be_found_is_a_usage_error_at_its_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "contract.yaml").read_text().replace("tests.doubles.decode:", "tests.doubles.nowhere:"))
    proc = kcontract("run", "--contract", str(bad), timeout=120)
    assert proc.returncode == 2
    assert f"ERROR: {bad}:12: entries[0].kernel.python: an importable module:function" in proc.stderr
    assert "Traceback" not in proc.stderr
