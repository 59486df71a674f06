"""`kcontract run --interpret`: a Triton entry's gates 1, 2 and 4 through Triton's interpreter on the CPU, a double
of its GPU run: the kernel passes, each planted control goes red at its gate, the SUMMARY says whose bits they
were, and options it cannot honour are refused in one line."""

from __future__ import annotations

import pytest

from click.testing import CliRunner

from kcontract.cli import cli
from tests.helpers.triton_project import ROOT, project

pytest.importorskip("triton", reason="Triton is not installed: pip install 'kcontract[triton]'")
pytest.importorskip("torch", reason="Triton's interpreter runs on torch CPU tensors: pip install torch")

LOOP = ("    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    for start in range(0, hidden, BLOCK):\n"
        "        offs = start + tl.arange(0, BLOCK)\n"
        "        h = tl.load(x + row + offs, mask=offs < hidden, other=0.0).to(tl.float32)\n        acc += h * h\n"
        "    inv = tl.rsqrt(tl.math.div_rn(tl.sum(acc, axis=0)")
SPLIT = LOOP.replace("acc += h * h", "if (tl.num_programs(0) <= 8) & ((start // BLOCK) % 2 == 1):\n"
                     "            odd += h * h\n        else:\n            acc += h * h") \
    .replace("    for start", "    odd = tl.zeros([BLOCK], dtype=tl.float32)\n    for start", 1) \
    .replace("tl.sum(acc, axis=0)", "tl.sum(acc + odd, axis=0)")
CONTROLS = {
    "eps_after_rsqrt": (1, "hidden.to(tl.float32)) + eps)", "hidden.to(tl.float32))) + eps"),
    "bf16_accumulator": (4, "        acc += h * h\n", "        acc = (acc + h * h).to(tl.bfloat16).to(tl.float32)\n"),
    "tail_dropped": (4, "mask=offs < hidden, other=0.0).to(tl.float32)\n        acc",
                     "mask=offs < hidden // BLOCK * BLOCK, other=0.0).to(tl.float32)\n        acc"),
    "order_from_grid": (2, LOOP, SPLIT),
}
THREE_BLOCKS = {"name": "m3_h2100", "hidden": 2100, "rows": 3}  # two whole blocks and a tail: chunks to reorder
SUMMARY_INTERPRETED = "in Triton's interpreter (numpy's bits, not a GPU's)"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_interpreted_gates_pass_and_every_planted_control_goes_red(tmp_path):
    contract = project(tmp_path, controls=CONTROLS, cases=(THREE_BLOCKS,))
    assert invoke("records", "--update", "--contract", str(contract)).exit_code == 0
    done = invoke("run", "--interpret", "--contract", str(contract))
    assert done.exit_code == 0, done.output
    assert "--interpret: 1 Triton entry and 4 controls through Triton's interpreter on the CPU" in done.output
    assert f"1 pass gates 1, 2 and 4 {SUMMARY_INTERPRETED}" in done.output, done.output
    assert "compile: 11 cubins (5 sources on up to 7 SMs)" in done.output, done.output  # gate 5's 7, a control's 1
    assert "4 controls: 4 red as planted, 0 missed" in done.output, done.output
    for name, (gate, _, _) in CONTROLS.items():
        assert f"control {name} (for triton_rms): red as planted at gate {gate}" in done.output, done.output


@pytest.mark.parametrize("args, said", [
    (("--receipt", "r.json"), "--interpret runs Triton kernels in Triton's interpreter, whose bits are numpy's, not a "
                              "GPU's: it writes no receipt; drop --receipt"),
    (("--shard", "1/2"), "it writes no receipt; drop --shard"),
    (("--only", "matmul_qkv_*"), "--interpret runs Triton kernels, and --only matmul_qkv_* picks none; Triton "
                                 "entries: rmsnorm_triton_h4096, matmul_triton_kv_k4096_n2048"),
    (("--control", "matmul_split_from_m"), "--interpret --control matmul_split_from_m: not a control of a Triton "
                                           "entry; Triton entries: rmsnorm_triton_h4096, matmul_triton_kv_k4096_n2048"),
    (("--sanitize",), "--sanitize runs each entry's smallest case at the contract's seed: drop"),
])
def test_what_an_interpreted_run_cannot_honour_is_one_line_and_exit_2(args, said):
    done = invoke("run", "--interpret", "--contract", str(ROOT / "contract.yaml"), *args)
    assert done.exit_code == 2, done.output
    assert done.output.count("\n") == 1 and said in done.output, done.output


def test_a_contract_without_triton_entries_has_nothing_to_interpret():
    done = invoke("run", "--interpret", "--contract", str(ROOT / "examples" / "rowsum" / "contract.yaml"))
    assert done.exit_code == 2, done.output
    assert "has no Triton entry" in done.output, done.output


@pytest.mark.parametrize("launches, said", [
    ((), "call c: its family gave no launch for k.py"),
    ((("other", ("x",)),), "call c: launch other names role other, which the kernel does not hold"),
    ((("rmsnorm", ("x", "y")),), "call c: launch rmsnorm names y, which the problem does not hold"),
])
def test_a_call_the_interpreter_cannot_launch_as_given_fails_in_one_line(launches, said):
    from kcontract.launch.base import KernelFailure
    from kcontract.launch.interpret import InterpretLauncher
    from kcontract.problem import KernelLaunch, Problem

    launcher = InterpretLauncher.__new__(InterpretLauncher)  # no import of a kernel: the checks come first
    launcher.label, launcher.roles = "k.py", {"rmsnorm": None}
    problem = Problem("c", {}, {}, {}, tuple(KernelLaunch(role, (1, 1, 1), args) for role, args in launches))
    with pytest.raises(KernelFailure) as failed:
        launcher._check_launches(problem, {"x": 1})
    assert failed.value.message == said
