"""`kcontract drift`: a request alone and in batches, its first differing torch op, and that op as a contract
entry that gate 2 shows red, then green with a row-by-row kernel (torch's CPU build; skipped without torch)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time

import pytest

from tests.helpers.cli import ROOT, kcontract, kcontract_here, no_traceback
from tests.helpers.drift_peak import measured_peaks

# skipped without torch, found without importing it: collection in every xdist worker stays free of torch's import
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="drift needs torch: pip install 'kcontract[torch]'")


def test_fp32_decode_drift_is_found_at_the_first_mm_and_its_entry_goes_red_then_green(tmp_path):
    report, contract = tmp_path / "drift.json", tmp_path / "emitted" / "drift.yaml"
    done = kcontract_here("drift", "examples.drift.llama:small", "--batch", "2,8", "--json", str(report),
                          "--emit-contract", str(contract))
    no_traceback(done)
    assert done.returncode == 1, done.stdout + done.stderr
    first = json.loads(report.read_text())["first"]
    assert (first["op"], first["module"]) == ("aten.mm", "layers.0.attn.qkv")
    assert first["differing"] > first["elements"] // 2 and first["max_ulps"] > 0
    assert "first differing op: #6 aten.mm in layers.0.attn.qkv" in done.stdout
    assert "reaches the output: yes" in done.stdout
    assert all(len(line) <= 200 for line in done.stdout.splitlines())
    in_process = {"KCONTRACT_CACHE": str(tmp_path / "cache"), "KCONTRACT_IN_PROCESS": "1"}  # torch is imported here
    red = kcontract_here("run", "--contract", str(contract), "--jobs", "1", env=in_process)
    no_traceback(red)
    assert red.returncode == 1 and "gate 2 order independence: FAIL" in red.stdout, red.stdout + red.stderr
    assert "worst: case m1_k1024_n1536" in red.stdout + red.stderr
    contract.write_text(contract.read_text().replace(":torch_op", ":row_by_row"))
    green = kcontract_here("run", "--contract", str(contract), "--jobs", "1", env=in_process)
    assert green.returncode == 0 and "1 kernels: 1 pass gates 1 and 2" in green.stdout, green.stdout + green.stderr


def test_the_row_by_row_variant_reports_no_differing_op():
    done = kcontract_here("drift", "examples.drift.llama:small_row_by_row", "--batch", "2,8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no op differs" in done.stdout


def test_after_a_cached_context_each_request_keeps_its_own_cache_in_any_slot():
    done = kcontract_here("drift", "examples.drift.llama:small_row_by_row", "--batch", "2,4", "--context", "64",
                          "--tokens", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 tokens after 64 cached" in done.stdout and "no op differs" in done.stdout
    drifting = kcontract_here("drift", "examples.drift.llama:small", "--batch", "2", "--context", "64")
    assert drifting.returncode == 1 and "first differing op: #6 aten.mm" in drifting.stdout, drifting.stdout


def test_bf16_logits_that_drift_leave_the_greedy_token_as_it_was(tmp_path):
    done = kcontract_here("drift", "examples.drift.llama:small_greedy", "--batch", "2,8", "--emit-contract",
                          str(tmp_path / "c.yaml"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "first differing op: #65 aten.mm in the model" in done.stdout
    assert "reaches the output: no, the output's 1 elements keep their bits" in done.stdout
    assert "later differing ops: 0" in done.stdout


@pytest.mark.parametrize("target, said", [
    ("tests.helpers.drift_targets:branching", "cannot align the op streams"),
    ("tests.helpers.drift_targets:not_a_pair", "must return (model, requests)"),
    ("tests.helpers.drift_targets:failing", "the model failed on a batch of requests: ValueError: shapes do not"),
    ("tests.helpers.drift_targets:absent", "has no callable absent"),
    ("no_such_module:factory", "cannot import no_such_module"),
    ("justaname", "module:factory expected"),
    ("tests.helpers.drift_targets:branching --context 8", "its factory takes no `context` argument"),
])
def test_a_bad_target_is_one_line_and_exit_2(target, said):
    done = kcontract_here("drift", *target.split(), "--batch", "2,8")
    no_traceback(done)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(errors) == 1 and said in errors[0], done.stderr


@pytest.mark.parametrize("option", [["--batch", "1"], ["--batch", "2,x"], ["--slot", "top"], ["--tokens", "0"],
                                    ["--context", "-1"]])
def test_a_bad_option_is_one_line_and_exit_2(option):
    done = kcontract("drift", "examples.drift.llama:small", *option)
    no_traceback(done)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr


def test_help_answers_without_importing_torch():
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import sys\nfrom kcontract.cli import main\nsys.argv = "
                           "['kcontract', 'drift', '--help']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
                           "assert 'torch' not in sys.modules, 'torch imported'"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0 and "--emit-contract" in done.stdout, done.stderr
    assert time.perf_counter() - began < 2.0  # a cold interpreter included


def test_the_request_part_is_its_slot_along_the_grown_dimension_and_ulps_count_floats():
    import torch

    from kcontract.drift.compare import difference, part

    batched = torch.arange(24.0).reshape(6, 4)  # 3 requests of 2 tokens, flattened
    assert part((2, 4), batched, 3, 1).tolist() == batched[2:4].tolist()
    assert part((1, 4), torch.zeros(3, 4), 3, 2).shape == (1, 4)
    assert part((2, 4), torch.zeros(5, 4), 3, 0) is None
    one = torch.tensor([1.0, -1.0, 0.0], dtype=torch.float32)
    nudged = torch.nextafter(one, torch.tensor(2.0))
    d = difference(one, nudged)
    assert (d.differing, d.max_ulps) == (3, 1)
    zeros = difference(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert zeros.differing == 1  # the sign bit is a bit


def test_each_family_answers_for_its_own_ops_and_an_op_of_none_is_named():
    from kcontract.drift.emit import answer
    from kcontract.family.torch_op import TorchOp

    def op(name, module_type="", operands=(((1, 64), "float32"), ((64, 32), "float32"))):
        return TorchOp(name, "m", module_type, list(operands), [[((8, 64), "float32"), ((64, 32), "float32")]],
                       "cpu", "t:f", 0)

    family, made = answer(op("aten.mm"))
    assert family == "matmul" and made.entry["cases"][0] == {"name": "m1_k64_n32", "m": 1, "k": 64, "n": 32}
    assert [c["m"] for c in made.entry["cases"]] == [1, 8] and "def row_by_row" in made.source
    family, made = answer(op("aten._scaled_dot_product_flash_attention_for_cpu"))
    assert family.startswith("attention") and made.entry is None and "maps to neither" in made.said
    family, made = answer(op("aten.mul", module_type="RMSNorm"))
    assert family == "rmsnorm" and made.entry is None
    assert answer(op("aten.bmm")) is None
    _, made = answer(op("aten.mm", operands=(((1, 64), "float16"), ((64, 32), "float16"))))
    assert made.entry is None and "float16" in made.said


def test_attentions_generator_state_is_no_output_to_compare():
    import torch

    from kcontract.drift.record import computed

    cudnn = torch.ops.aten._scaled_dot_product_cudnn_attention.default
    result = (torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3), torch.empty(0), torch.empty(0), 3, 3,
              torch.tensor(7), torch.tensor(9), torch.empty(0))
    kept = computed(cudnn, result)
    assert len(kept) == 4 and kept[0][2] is result[0] and kept[1][2] is result[1]
    assert [(place, name) for place, name, _ in kept][:2] == [(0, "output"), (1, "logsumexp")]
    assert all(t is not result[6] and t is not result[7] for _, _, t in kept)
    flash = torch.ops.aten._scaled_dot_product_flash_attention.default
    state = torch.tensor([1, 2])
    assert all(t is not state for _, _, t in computed(flash, (torch.ones(2), torch.ones(1), None, None, 1, 1, state,
                                                              torch.empty(0), torch.empty(0))))
    split = torch.ops.aten.split.Tensor
    pieces = (torch.ones(2), torch.ones(2))
    assert [t for _, _, t in computed(split, pieces)] == list(pieces)


def test_a_refused_emit_contract_path_is_named_as_the_option_typed(tmp_path):
    done = kcontract("drift", "examples.drift.llama:small", "--emit-contract", str(tmp_path))
    no_traceback(done)
    assert done.returncode == 2 and done.stderr.startswith(f"ERROR: --emit-contract {tmp_path}: is a directory"), \
        done.stderr


def test_an_op_of_several_outputs_names_the_output_that_differs(tmp_path):
    report = tmp_path / "drift.json"
    done = kcontract_here("drift", "tests.helpers.drift_targets:attention_like", "--batch", "2,8", "--json",
                          str(report))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "first differing op: #1 kctest.attend output 1 (logsumexp) in the model (batch 2, first slot)" in \
        done.stdout, done.stdout
    assert "  its output 1 (logsumexp): 1 of 1 elements differ (100.0 %), at most 1 ulps" in done.stdout
    assert "  batch    8 last    #1 kctest.attend output 1 (logsumexp) in the model" in done.stdout
    first = json.loads(report.read_text())["first"]
    assert (first["op"], first["output"], first["output_name"]) == ("kctest.attend", 1, "logsumexp")


def test_the_default_batches_peak_within_1_5x_of_the_largest_batch_alone():
    largest, default = measured_peaks("tests.helpers.drift_targets:wide", 32,
                                      [("64", "first"), ("2,8,64", "first,middle,last")])
    assert default <= 1.5 * largest, f"{default:,} bytes at the default batches, {largest:,} at batch 64 alone"
