"""`run --sanitize` without a GPU: targets, a stand-in compute-sanitizer's reports, the verdict and refusals."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.launch import gpu_present
from kcontract.sanitizer import TOOLS, parse, sanitize, targets, verdict

ROOT = Path(__file__).resolve().parent.parent
FAKE = """#!/bin/sh
# A stand-in compute-sanitizer: reports by tool and by the kernel named in the child's arguments.
tool=$2
case "$*" in
  *missing_syncthreads*) if [ "$tool" = racecheck ]; then
      echo "========= Error: Race reported between Write access at window_decode_partials+0x1a0"
      echo "========= RACECHECK SUMMARY: 12 hazards displayed (12 errors, 0 warnings)"; exit 99; fi ;;
  *decode_d512_g5*) if [ "$tool" = initcheck ]; then
      echo "========= Uninitialized __global__ memory read of size 2 bytes"
      echo "========= ERROR SUMMARY: 4 errors"; exit 99; fi ;;
esac
echo "========= ERROR SUMMARY: 0 errors"
"""


def fake_sanitizer(tmp_path) -> str:
    path = tmp_path / "compute-sanitizer"
    path.write_text(FAKE)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_targets_are_each_cuda_entrys_smallest_case_and_its_controls():
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    found = targets(loaded, loaded.entries, with_controls=True)
    entries = [t for t in found if t.kind == "entry"]
    assert [t.name for t in entries] == [e.name for e in loaded.entries]
    assert next(t for t in entries if t.name == "decode_d512_g16").case == "linear_20000"
    controls = [t for t in found if t.kind == "control"]
    assert {t.name for t in controls} == {c.name for c in loaded.controls if c.gate != 5}
    assert all(t.case == next(e.case for e in entries if e.name == t.entry) for t in controls)
    assert loaded.control("decode_missing_syncthreads").sanitize == "racecheck"


def test_a_stand_in_sanitizer_marks_dirty_entries_and_red_controls(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_SANITIZER", fake_sanitizer(tmp_path))
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    chosen = [loaded.entry("decode_d512_g5"), loaded.entry("decode_d256_g8_sliding")]
    found = targets(loaded, chosen, with_controls=True)
    findings = sanitize("contract.yaml", found, TOOLS, jobs=4, timeout=60)
    assert len(findings) == 4 * len(found)
    dirty = {(f.target.name, f.tool): f for f in findings if f.status != "clean"}
    assert set(dirty) == {("decode_d512_g5", "initcheck"), ("decode_missing_syncthreads", "racecheck")}
    assert dirty["decode_missing_syncthreads", "racecheck"].errors == 12
    assert "Race reported" in dirty["decode_missing_syncthreads", "racecheck"].detail
    passed, line = verdict(findings, {"decode_missing_syncthreads": "racecheck"})
    assert not passed and line.startswith("SANITIZE 2 kernels under initcheck, memcheck, racecheck, synccheck: "
                                          "1 clean, 1 not (decode_d512_g5); controls with errors: 1")
    clean = [f for f in findings if f.target.name != "decode_d512_g5"]
    assert verdict(clean, {"decode_missing_syncthreads": "racecheck"})[0]
    assert not verdict(clean, {"decode_missing_syncthreads": "memcheck"})[0]  # planted elsewhere: missed


def test_a_launch_that_fails_or_prints_no_summary_is_not_clean():
    assert parse("memcheck", 1, "Traceback ...\nRuntimeError: boom")[0] == "failed"
    assert parse("memcheck", 0, "nothing")[0] == "failed"
    assert parse("synccheck", 0, "========= ERROR SUMMARY: 0 errors") == ("clean", 0, "")


def test_sanitize_refuses_gate_options_and_python_only_contracts():
    done = CliRunner().invoke(cli, ["run", "--contract", str(ROOT / "contract.yaml"), "--sanitize", "--gate", "1"])
    assert done.exit_code == 2 and "--sanitize runs each entry's smallest case" in done.output
    cpu = CliRunner().invoke(cli, ["run", "--contract", str(ROOT / "tests/contracts/cpu.yaml"), "--sanitize"])
    assert cpu.exit_code == 2 and "no CUDA entry or control selected" in cpu.output


@pytest.mark.skipif(gpu_present(), reason="a GPU is present: the GPU tests run the sanitizer for real")
def test_sanitize_without_a_gpu_is_an_environment_problem():
    done = CliRunner().invoke(cli, ["run", "--contract", str(ROOT / "contract.yaml"), "--sanitize", "--only",
                                    "decode_d512_g5", "--no-controls"])
    assert done.exit_code == 3 and "need a CUDA GPU" in done.output


def test_memcheck_guards_every_allocation_and_the_child_turns_the_pool_off(monkeypatch):
    import sys
    import types

    from kcontract.sanitizer import PADDING_BYTES, Target, command
    from kcontract.sanitizer.child import _own_allocations

    target = Target("entry", "decode_d512_g5", "decode_d512_g5", "linear_20000")
    memcheck = command("cs", "memcheck", "contract.yaml", target)
    assert memcheck[memcheck.index("--padding") + 1] == str(PADDING_BYTES)
    assert all("--padding" not in command("cs", tool, "contract.yaml", target) for tool in TOOLS if tool != "memcheck")
    chosen = []
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(set_allocator=chosen.append))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    _own_allocations()
    assert chosen == [None]
