"""Triton kernels as a compiled kind: compiled ahead of time for every target SM without a GPU, their launch records
kept per Triton toolchain, their controls patches that must change machine code, and sass-diff across revisions."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from tests.helpers.triton_project import SOURCE, TARGETS, checked_afresh, committed, project

pytest.importorskip("triton", reason="Triton is not installed: pip install 'kcontract[triton]'")

COMMENT = ("    row = tl.program_id(0)", "    # a comment that plants nothing\n    row = tl.program_id(0)")
EPS_AFTER = ("hidden.to(tl.float32)) + eps)", "hidden.to(tl.float32))) + eps")
MORE_WORK = ("acc += h * h", "acc += h * h * h / h")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_triton_entry_compiles_for_every_target_and_its_records_hold(tmp_path):
    contract = project(tmp_path, controls={"more_work": (5, *MORE_WORK)})
    updated = invoke("records", "--update", "--contract", str(contract))
    assert updated.exit_code == 0, updated.output
    folders = [p for p in (tmp_path / "records").iterdir() if p.is_dir()]
    assert [p.name[:len("triton-")] for p in folders] == ["triton-"], folders
    assert re.fullmatch(r"triton-\d+\.\d+\.\d+\+ptxas-[\d.+]+", folders[0].name), folders[0].name
    record = json.loads((folders[0] / "triton_rms.json").read_text())
    kernel = record["kernels"]["rmsnorm"]
    assert record["source"] == SOURCE and sorted(kernel["sms"]) == sorted(TARGETS)
    assert kernel["threads"] == 128 and kernel["mangled"] == "rms_norm_rows"
    assert all(sm["registers"] > 0 and sm["spill_stores"] == 0 for sm in kernel["sms"].values())
    done = invoke("check", "--contract", str(contract))
    assert done.exit_code == 0, done.output
    assert "gate 5: 7 current, 0 stale, 0 missing" in done.output, done.output
    assert "more_work (gate 5, for triton_rms): red as planted: stale against triton_rms's record" in done.output


def test_a_comment_only_triton_control_is_refused_and_a_real_one_is_not(tmp_path):
    contract = project(tmp_path, controls={"comment": (1, *COMMENT), "eps_after_rsqrt": (1, *EPS_AFTER)})
    assert invoke("records", "--update", "--contract", str(contract)).exit_code == 0
    done = invoke("check", "--contract", str(contract))
    assert done.exit_code == 2, done.output
    errors = [line for line in done.output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, done.output
    assert re.search(r"contract\.yaml:\d+: controls\[0\]\.patch: a patch that changes machine code; "
                     r"controls/comment\.patch leaves every function of kernels/rms_norm_triton\.py with its "
                     r"machine code \(normalised SASS\) on sm_80, .*sm_121", errors[0]), errors[0]


def test_sass_diff_names_an_edited_triton_kernel_changed_and_the_untouched_one_identical(tmp_path):
    contract = project(tmp_path, copies=("untouched",))
    committed(tmp_path)
    source = tmp_path / SOURCE
    source.write_text(source.read_text().replace("mask=mask, other=0.0).to(tl.float32)\n        tl.store",
                                                 "mask=mask, other=1.0).to(tl.float32)\n        tl.store"))
    done = invoke("sass-diff", "--base", "HEAD", "--contract", str(contract))
    assert done.exit_code == 0, done.output
    assert "kernels/rms_norm_triton.py: SASS equal on 0 of 7 SMs, 0 of 1 functions" in done.output, done.output
    assert "kernels/untouched.py: SASS equal on 7 of 7 SMs, 1 of 1 functions" in done.output, done.output
    assert re.search(r"SASS-DIFF HEAD -> working tree: 2 sources, 2 functions x 7 SMs: 7 identical bytes, "
                     r"0 identical SASS, 7 changed", done.output), done.output


@pytest.mark.parametrize("symbol, said", [
    ("rms_norm_rows(BLOCK=n)", r"kernel\.triton\.symbols: .*BLOCK is not a literal"),
    ("rms_norm_rows(1024)", r"kernel\.triton\.symbols: .*is not a call of a jit function by keyword"),
    ("rms_norm_rows(BLOCK=1024, num_warps=0)", r"kernel\.triton\.symbols: .*num_warps is a positive integer"),
    ("rms_norm_rows(BLOCK=1024, divisibility=16)", r"kernel\.triton\.symbols: .*divisibility names parameters and "
                                                   r"powers of two dividing them"),
    ("rms_norm_rows(BLOCK=1024, divisibility='x:12')", r"kernel\.triton\.symbols: .*divisibility of x is a power of "
                                                       r"two from 2 to 1048576, given 12"),
    ("rms_norm_rows(BLOCK=1024, divisibility='x=16')", r"kernel\.triton\.symbols: .*divisibility pairs read "
                                                       r"NAME:POWER"),
    ("rms_norm_rows(BLOCK=1024, divisibility='x:16 x:8')", r"kernel\.triton\.symbols: .*divisibility names x twice"),
])
def test_a_malformed_triton_symbol_is_one_line_at_its_entry(tmp_path, symbol, said):
    contract = project(tmp_path, symbol=symbol)
    done = invoke("check", "--contract", str(contract))
    assert done.exit_code == 2 and "Traceback" not in done.output, done.output
    assert re.search(rf"contract\.yaml:\d+: entries\[0\]\.{said}", done.output), done.output


@pytest.mark.parametrize("symbol, said", [
    ("rms_norm_rows(BLOK=1024)", "`rms_norm_rows` has no parameter BLOK"),
    ("rms_norm_rows", "give constexpr BLOCK a value in the symbol"),
    ("no_such_kernel(BLOCK=1024)", "rms_norm_triton.py has no @triton.jit function `no_such_kernel`"),
    ("rms_norm_rows(BLOCK=1024, divisibility='rows:16')", "`rms_norm_rows` has no parameter rows to declare "
                                                             "divisible by 16"),
    ("rms_norm_rows(BLOCK=1024, divisibility='BLOCK:16')", "BLOCK is a constexpr, whose value is known"),
    ("rms_norm_rows(BLOCK=1024, divisibility='eps:16')", "eps is fp32; divisibility is declared of pointers and "
                                                            "integers"),
])
def test_a_triton_symbol_that_does_not_compile_says_why(tmp_path, symbol, said):
    contract = project(tmp_path, symbol=symbol)
    done = invoke("check", "--contract", str(contract))
    assert done.exit_code != 0 and "Traceback" not in done.output, done.output
    assert said in done.output, done.output


def test_a_triton_kernel_is_launched_with_its_scratch_pointers_after_the_problems_arguments():
    """Triton's ABI: the kernel's own parameters, then its global and profile scratch pointers, passed null."""
    import numpy as np

    from kcontract.launch.cuda import trailing_args
    from kcontract.problem import KernelLaunch
    from tests.helpers.launch_stub import stub_launcher

    launcher, calls = stub_launcher()
    step = KernelLaunch("rmsnorm", (3, 1, 1), ("x", "w", "out", "hidden", "eps"))
    values = {"x": "X", "w": "W", "out": "OUT", "hidden": np.int32(8), "eps": np.float32(1e-6)}
    launcher.launch_steps((step,), values, stream=None, label="call")
    (args, shared), = calls
    assert args[:5] == ("X", "W", "OUT", np.int32(8), np.float32(1e-6)) and shared == 16
    assert [(type(a), int(a)) for a in args[5:]] == [(np.uint64, 0)] * 2
    assert trailing_args("cuda") == ()


def test_without_triton_a_triton_entry_says_how_to_install_it_in_one_line(tmp_path, monkeypatch):
    import sys

    contract = project(tmp_path)
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    done = checked_afresh(contract)
    assert done.exit_code == 3 and "Traceback" not in done.output, done.output
    assert "Triton kernels need Triton: pip install 'kcontract[triton]'" in done.output, done.output


def test_triton_mutants_change_one_code_line_each_in_every_class():
    from kcontract.mutate.triton_operators import CLASSES, triton_mutants
    from tests.helpers.triton_project import ROOT

    text = (ROOT / SOURCE).read_text()
    lines = text.splitlines()
    made = triton_mutants(text, ("x", "w", "out", "hidden", "eps"), 400, seed=3)
    assert {m.kind for m in made} == set(CLASSES)
    kept = {i + 1 for i, line in enumerate(lines)
            if not line.lstrip().startswith(("def ", "@", "import ", '"""', "#")) and i + 1 > 15}
    for m in made:
        changed = [n + 1 for n, (a, b) in enumerate(zip(lines, m.source.splitlines())) if a != b]
        assert changed == [m.line] and m.line in kept, (m.kind, m.change, changed)
    assert len({m.source for m in made}) == len(made)  # no two mutants alike


def test_mutate_prepares_a_triton_campaign_without_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    contract = project(tmp_path / "p")
    report = tmp_path / "m.json"
    done = invoke("mutate", "triton_rms", "--contract", str(contract), "--limit", "12", "--prepare-only", "--sm",
                  "sm_90a", "--json", str(report))
    assert done.exit_code == 0 and "Traceback" not in done.output, done.output
    assert re.search(r"mutate triton_rms: 12 mutants in .*: \d+ do not compile, \d+ equivalent on sm_90a, \d+ to run",
                     done.output), done.output
    by_status = json.loads(report.read_text())["by_status"]
    assert by_status.get("candidate", 0) > 0 and sum(by_status.values()) == 12, by_status
    mutants = json.loads((tmp_path / "cache" / "mutants" / "triton_rms" / "campaign.json").read_text())["mutants"]
    assert all(m["detail"].startswith("CompilationError error: ") for m in mutants if m["status"] == "stillborn")


def test_records_name_every_toolchain_that_built_the_entries(tmp_path):
    contract = project(tmp_path)
    done = invoke("records", "--update", "--contract", str(contract))
    assert done.exit_code == 0, done.output
    assert re.search(r"^RECORDS triton-\d+\.\d+\.\d+\+ptxas-[\d.+]+ in .*: 7 current, 0 stale, 0 missing", done.output,
                     re.M), done.output


def test_a_triton_source_that_exits_on_import_fails_its_compile_and_check_goes_on(tmp_path):
    contract = project(tmp_path)
    source = tmp_path / SOURCE
    source.write_text(source.read_text().replace("import triton\n", "import sys\nimport triton\nsys.exit(0)\n", 1))
    done = invoke("check", "--contract", str(contract))
    assert done.exit_code != 0 and "Traceback" not in done.output, done.output
    assert "rms_norm_triton.py while compiling `rms_norm_rows(BLOCK=1024, num_warps=4, num_stages=1)` raised " \
           "SystemExit(0)" in done.output, done.output
    assert "SUMMARY check FAILED" in done.output, done.output


def test_a_triton_whose_ptxas_does_not_run_is_one_environment_line(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from triton.backends.nvidia import compiler


    contract = project(tmp_path)
    monkeypatch.setattr(compiler, "get_ptxas", lambda arch: SimpleNamespace(path=str(tmp_path / "no-ptxas")))
    done = checked_afresh(contract)
    assert done.exit_code == 3 and "Traceback" not in done.output, done.output
    assert re.search(r"Triton [\d.]+'s ptxas for sm_90 does not run \(.*\): reinstall Triton", done.output), done.output


def test_a_declared_divisibility_compiles_the_wide_loads_a_jit_launch_would_get():
    """Triton's launcher declares arguments divisible by 16 where they are; ahead of time nothing is known unless the
    symbol says it, and without it every bf16 load is two bytes wide."""
    from tests.helpers.triton_sass import global_loads

    plain = global_loads("rms_norm_rows(BLOCK=1024, num_warps=4, num_stages=1)", "sm_90a")
    declared = global_loads("rms_norm_rows(BLOCK=1024, num_warps=4, num_stages=1, "
                            "divisibility='x:16 w:16 out:16 hidden:8')", "sm_90a")
    assert plain and all(".128" not in op for op in plain), plain
    assert any(".128" in op for op in declared), declared


def test_a_job_carries_the_divisibility_its_triton_compile_assumed_by_argument_position(tmp_path):
    """x, w, out and hidden are the rms_norm_rows parameters 0 to 3: the worker checks launches by position."""
    from kcontract.builds.builds import Builds
    from kcontract.contract.loader import load_contract

    symbol = "rms_norm_rows(BLOCK=1024, num_warps=4, num_stages=1, divisibility='x:16 hidden:8')"
    loaded = load_contract(str(project(tmp_path, symbol=symbol)))
    kernel = loaded.entries[0].kernel.triton
    module = Builds.of(loaded, jobs=1).kernel(kernel, ["sm_90a"]).on("sm_90a")
    (divisors,) = module.divisors.values()
    assert divisors == {0: ("x", 16), 3: ("hidden", 8)}


def test_a_launch_that_breaks_its_declared_divisibility_is_red_with_the_argument_named():
    """A compile that assumed `hidden:8` and `x:16` would read misaligned on hidden 3000 + 1 or an odd address."""
    import numpy as np

    from kcontract.launch.base import KernelFailure
    from kcontract.problem import KernelLaunch
    from tests.helpers.launch_stub import BufferAt, stub_launcher

    launcher, calls = stub_launcher({"rmsnorm": {0: ("x", 16), 3: ("hidden", 8)}})
    step = KernelLaunch("rmsnorm", (3, 1, 1), ("x", "w", "out", "hidden", "eps"))
    held = {"x": BufferAt(0x10000), "w": "W", "out": "OUT", "hidden": np.int32(4096), "eps": np.float32(1e-6)}
    launcher.launch_steps((step,), held, stream=None, label="call m1")
    assert len(calls) == 1
    for broken, said in (({"hidden": np.int32(3001)}, "hidden = 3001, not a multiple of 8"),
                         ({"x": BufferAt(0x10008)}, "x = 0x10008, not a multiple of 16")):
        with pytest.raises(KernelFailure, match="breaks its symbol's declared divisibility") as failure:
            launcher.launch_steps((step,), held | broken, stream=None, label="call m1")
        assert said in str(failure.value) and "call m1" in str(failure.value)
    assert len(calls) == 1
