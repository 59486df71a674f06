"""sass-diff: normalisation, and the three constructed pairs (comment, rename, one operator) in throwaway repos."""

from __future__ import annotations

import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.sassdiff.diff import CHANGED, SAME_BYTES, SAME_SASS, sass_diff
from kcontract.sassdiff.normalise import kernel_code, normalise, split_functions
from kcontract.cachedir import default_root
from kcontract.toolchain.cache import CompileCache

CONTRACT = """version: 1
seed: 1
targets: [sm_80, sm_90]
entries:
  - name: k
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/k.cu, symbols: {scale: "scale<32>", bias: add_bias}}}
    launch: {scale: {threads: 128}, bias: {threads: 128}}
"""
KERNEL = """// Two kernels for sass-diff tests.
__constant__ float c_bias[4];

template <int N>
__global__ void scale(float* x, float a) {
  __shared__ float buf[N];
  int i = threadIdx.x;
  buf[i % N] = x[i] * a;
  __syncthreads();
  x[i] = buf[(i + 1) % N];
}

extern "C" __global__ void add_bias(float* x) {
  float v = x[threadIdx.x];
  x[threadIdx.x] = v + c_bias[1];
}
"""
SASS = """
//--------------------- .text._Z1kPf          --------------------------
\t.section\t.text._Z1kPf,"ax",@progbits
\t.align\t128
        .global         _Z1kPf
        .type           _Z1kPf,@function
_Z1kPf:
.text._Z1kPf:
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
        /*0010*/              @P0  BRA `(.L_x_7) ;
        /*0020*/                   FADD R0, R0, 1 ;
.L_x_7:
        /*0030*/                   EXIT ;
.L_x_9:
        /*0040*/                   BRA `(.L_x_9);
        /*0050*/                   NOP;
        /*0060*/                   NOP;
.L_x_12:


//--------------------- .text.other            --------------------------
\t.section\t.text.other,"ax",@progbits
other:
        /*0000*/                   EXIT ;
"""

# A kernel that calls an internal function placed in its own section (numbered module-wide by the compiler) and a
# function with a section of its own (as -rdc=true places it)
CALLS = """
\t.section\t.text.helper,"ax",@progbits
helper:
        /*0000*/                   FFMA R4, R4, R5, 1 ;
        /*0010*/                   RET.ABS.NODEC R20 0x0 ;
\t.section\t.text.unused,"ax",@progbits
unused:
        /*0000*/                   EXIT ;
\t.section\t.text._Z1kPf,"ax",@progbits
_Z1kPf:
        /*0000*/                   CALL.REL.NOINC `($__internal_2_$__cuda_sm3x_div_rn_noftz_f32_slowpath) ;
        /*0010*/                   CALL.ABS.NOINC `(helper) ;
        /*0020*/                   CALL.REL.NOINC `($__internal_3_$__cuda_sm20_rem_s64) ;
        /*0030*/                   EXIT ;
        .type           $__internal_2_$__cuda_sm3x_div_rn_noftz_f32_slowpath,@function
$__internal_2_$__cuda_sm3x_div_rn_noftz_f32_slowpath:
        /*0040*/                   FADD R0, R0, 1 ;
        /*0050*/                   RET.REL.NODEC R36 `(_Z1kPf) ;
$__internal_3_$__cuda_sm20_rem_s64:
        /*0060*/                   IADD3 R0, R0, 1, RZ ;
        /*0070*/                   RET.REL.NODEC R36 `(_Z1kPf) ;
"""


@pytest.fixture(autouse=True)
def shared_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path_factory.getbasetemp() / "kcontract-cache"))


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    """A throwaway repo whose HEAD holds the contract and kernels/k.cu."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    (tmp_path / "kernels" / "k.cu").write_text(KERNEL)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def edit(repo: Path, old: str, new: str) -> None:
    path = repo / "kernels" / "k.cu"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def verdicts(repo: Path, base: str = "HEAD", head: str | None = None):
    result = sass_diff(repo, "contract.yaml", base, head, None, default_root(repo / "contract.yaml"), jobs=2)
    return result, {(r.expression, r.sm): r.verdict for r in result.results}


def test_normalise_strips_offsets_encodings_labels_and_padding():
    functions = split_functions(SASS)
    assert list(functions) == ["_Z1kPf", "other"]
    assert normalise(functions["_Z1kPf"], "_Z1kPf") == [
        "LDC R1, c[0x0][0x28]", "@P0 BRA `(L0)", "FADD R0, R0, 1", "L0:", "EXIT", "L1:", "BRA `(L1)"]
    renumbered = SASS.replace(".L_x_7", ".L_x_70").replace(".L_x_9", ".L_x_3").replace("/*0010*/", "/*0110*/")
    assert normalise(split_functions(renumbered)["_Z1kPf"], "_Z1kPf") == normalise(functions["_Z1kPf"], "_Z1kPf")
    changed = SASS.replace("FADD R0, R0, 1", "FADD R0, R0, -1")
    assert normalise(split_functions(changed)["_Z1kPf"], "_Z1kPf") != normalise(functions["_Z1kPf"], "_Z1kPf")


def test_internal_functions_are_renumbered_per_kernel_and_called_functions_count():
    code = kernel_code(split_functions(CALLS), "_Z1kPf")
    assert code == ["CALL.REL.NOINC `($__internal_F0_$__cuda_sm3x_div_rn_noftz_f32_slowpath)",
                    "CALL.ABS.NOINC `(helper)", "CALL.REL.NOINC `($__internal_F1_$__cuda_sm20_rem_s64)", "EXIT",
                    "$__internal_F0_$__cuda_sm3x_div_rn_noftz_f32_slowpath:", "FADD R0, R0, 1",
                    "RET.REL.NODEC R36 `(_Z1kPf)", "$__internal_F1_$__cuda_sm20_rem_s64:", "IADD3 R0, R0, 1, RZ",
                    "RET.REL.NODEC R36 `(_Z1kPf)", "section helper:", "FFMA R4, R4, R5, 1", "RET.ABS.NODEC R20 <addr>"]
    moved = CALLS.replace("$__internal_2_", "$__internal_7_").replace("$__internal_3_", "$__internal_0_")
    assert kernel_code(split_functions(moved), "_Z1kPf") == code  # another instantiation moved the numbering
    same_numbers = CALLS.replace("$__internal_2_$__cuda_sm3x_div_rn_noftz_f32_slowpath) ;",
                                 "$__internal_3_$__cuda_sm20_rem_s64) ;", 1)
    assert kernel_code(split_functions(same_numbers), "_Z1kPf") != code  # a call to the other function
    for changed in (CALLS.replace("FADD R0, R0, 1", "FADD R0, R0, 2"),  # a changed internal function
                    CALLS.replace("FFMA R4, R4, R5, 1", "FFMA R4, R4, R5, 2"),  # a changed callee in its own section
                    CALLS.replace("$__internal_2_$__cuda_sm3x_div_rn_noftz_f32_slowpath:",  # bodies swapped
                                  "$__internal_9_$").replace("$__internal_3_$__cuda_sm20_rem_s64:",
                                                             "$__internal_2_$__cuda_sm3x_div_rn_noftz_f32_slowpath:")
                    .replace("$__internal_9_$", "$__internal_3_$__cuda_sm20_rem_s64:")):
        assert kernel_code(split_functions(changed), "_Z1kPf") != code
    assert kernel_code(split_functions(CALLS.replace("EXIT ;\n\t.section", "TRAP ;\n\t.section")), "_Z1kPf") == code


def test_comment_only_change_is_identical_bytes(repo):
    edit(repo, "// Two kernels", "// Two small kernels, with a longer comment\n// on two lines")
    result, found = verdicts(repo)
    assert set(found.values()) == {SAME_BYTES} and len(found) == 4
    assert result.source_lines() == ["kernels/k.cu: SASS equal on 2 of 2 SMs, 2 of 2 functions"]


def test_renaming_a_variable_is_identical_sass(repo):
    edit(repo, "c_bias[4];", "c_offset[4];")
    edit(repo, "v + c_bias[1]", "v + c_offset[1]")
    result, found = verdicts(repo)
    assert set(found.values()) == {SAME_SASS}  # the cubin's symbol names changed, the machine code did not
    assert result.source_lines() == ["kernels/k.cu: SASS equal on 2 of 2 SMs, 2 of 2 functions"]
    assert not result.changed


def test_one_operator_change_is_changed_with_a_diff(repo):
    edit(repo, "v + c_bias[1]", "v * c_bias[1]")
    result, found = verdicts(repo)
    assert found[("add_bias", "sm_80")] == found[("add_bias", "sm_90")] == CHANGED
    assert found[("scale<32>", "sm_80")] == found[("scale<32>", "sm_90")] == SAME_BYTES
    diff = next(r.diff for r in result.results if r.expression == "add_bias" and r.sm == "sm_90")
    assert any(line.strip().startswith("-FADD") for line in diff)
    assert any(line.strip().startswith("+FMUL") for line in diff)
    assert result.source_lines() == ["kernels/k.cu: SASS equal on 0 of 2 SMs, 1 of 2 functions"]
    assert result.summary().endswith("2 identical bytes, 0 identical SASS, 2 changed, 0 new, 0 removed")


def test_cli_compares_two_commits_and_reports_new_kernels(repo):
    (repo / "contract.yaml").write_text(CONTRACT.replace("bias: add_bias}", "bias: add_bias, wide: \"scale<64>\"}")
                                        .replace("bias: {threads: 128}}", "bias: {threads: 128}, wide: {threads: 64}}"))
    edit(repo, "v + c_bias[1]", "v - c_bias[1]")
    git(repo, "commit", "-qam", "head")
    runner = CliRunner()
    done = runner.invoke(cli, ["sass-diff", "--contract", str(repo / "contract.yaml"), "--base", "HEAD~1",
                               "--head", "HEAD", "--sm", "90"])
    assert done.exit_code == 0, done.output
    assert "changed: kernels/k.cu add_bias on sm_90" in done.output
    assert "new: kernels/k.cu scale<64> on sm_90" in done.output
    assert "kernels/k.cu: SASS equal on 0 of 1 SMs, 1 of 3 functions" in done.output
    assert "SASS-DIFF HEAD~1 -> HEAD: 1 sources, 3 functions x 1 SMs:" in done.output
    strict = runner.invoke(cli, ["sass-diff", "--contract", str(repo / "contract.yaml"), "--base", "HEAD~1",
                                 "--sm", "sm_90", "--exit-code"])
    assert strict.exit_code == 1
    same = runner.invoke(cli, ["sass-diff", "--contract", str(repo / "contract.yaml"), "--exit-code"])
    assert same.exit_code == 0 and "6 identical bytes" in same.output


def test_bad_revision_and_no_repository_are_usage_errors(repo, tmp_path_factory):
    runner = CliRunner()
    bad = runner.invoke(cli, ["sass-diff", "--contract", str(repo / "contract.yaml"), "--base", "nope~3"])
    assert bad.exit_code == 2 and "no commit `nope~3`" in bad.output
    lonely = tmp_path_factory.mktemp("not-a-repo")
    (lonely / "contract.yaml").write_text(CONTRACT)
    outside = runner.invoke(cli, ["sass-diff", "--contract", str(lonely / "contract.yaml")])
    assert outside.exit_code == 2 and "is not inside a git work tree" in outside.output


def test_a_revision_holding_a_link_out_of_the_repository_is_one_line(repo, tmp_path_factory):
    (repo / "out.cu").symlink_to(tmp_path_factory.mktemp("elsewhere") / "k.cu")
    git(repo, "add", "out.cu")
    git(repo, "commit", "-qm", "a link out")
    done = CliRunner().invoke(cli, ["sass-diff", "--contract", str(repo / "contract.yaml")])
    errors = [line for line in done.output.splitlines() if line.startswith("ERROR:")]
    assert done.exit_code == 2 and not isinstance(done.exception, tarfile.TarError), done.output
    assert len(errors) == 1 and errors[0].startswith("ERROR: HEAD: 'out.cu' is a link to an absolute path: "), done.output
    assert "sass-diff unpacks a revision's files only inside it" in errors[0]


def test_base_without_a_contract_makes_every_kernel_new(repo):
    git(repo, "rm", "-q", "contract.yaml")
    git(repo, "commit", "-qm", "no contract")
    (repo / "contract.yaml").write_text(CONTRACT)
    result, found = verdicts(repo, base="HEAD")
    assert set(found.values()) == {"new"}


def test_an_old_contract_with_named_kernels_that_no_longer_loads_is_named(tmp_path):
    from kcontract.errors import ContractError
    from kcontract.sassdiff.kernels import contract_kernels

    path = tmp_path / "contract.yaml"
    path.write_text("version: 1\nseed: 1\nentries:\n  - {name: e, family: attention.decode, kernel: window_old,"
                    " shape: {head_dim: 99}}\n")
    with pytest.raises(ContractError, match="kernel 'window_old' is named") as caught:
        contract_kernels(path, "HEAD~3:contract.yaml")
    assert "run sass-diff from its checkout" in caught.value.message and "window_old" in caught.value.message


DIVIDE = """template <int N>
__global__ void ratio(float* x, float a) { x[threadIdx.x] = __fdiv_rn(x[threadIdx.x], a + N); }

__device__ __noinline__ float helper(float x, float a) { return x * a + 1.0f; }

extern "C" __global__ void call(float* x, float a) { x[threadIdx.x] = helper(x[threadIdx.x], a); }
"""


def test_another_instantiation_moves_internal_numbers_and_keeps_the_sass(repo):
    """Naming ratio<2> too renumbers ratio<1>'s internal division function: its bytes change, its SASS does not."""
    (repo / "kernels" / "k.cu").write_text(DIVIDE)
    one = CONTRACT.replace('{scale: "scale<32>", bias: add_bias}', '{one: "ratio<1>"}').replace(
        "{scale: {threads: 128}, bias: {threads: 128}}", "{one: {threads: 32}}")
    (repo / "contract.yaml").write_text(one)
    git(repo, "commit", "-qam", "one instantiation")
    (repo / "contract.yaml").write_text(one.replace('{one: "ratio<1>"}', '{one: "ratio<1>", two: "ratio<2>"}')
                                        .replace("{one: {threads: 32}}", "{one: {threads: 32}, two: {threads: 32}}"))
    result, found = verdicts(repo)
    assert found[("ratio<1>", "sm_80")] == found[("ratio<1>", "sm_90")] == SAME_SASS, result.changed_blocks()
    called = {re.search(r"\$__internal_(\d+)_\$", "".join(lines)).group(1)
              for path in CompileCache(default_root(repo / "contract.yaml")).root.glob("*/*/sass.txt")
              for name, lines in split_functions(path.read_text()).items() if name == "_Z5ratioILi1EEvPff"}
    assert len(called) == 2, called  # the two builds number it differently


def test_a_changed_function_in_a_section_of_its_own_changes_its_callers_code(repo):
    """Under -rdc=true a called function has its own section: a change there is a change of the kernel's code."""
    (repo / "kernels" / "k.cu").write_text(DIVIDE)
    (repo / "contract.yaml").write_text(CONTRACT.replace(
        '{source: kernels/k.cu, symbols: {scale: "scale<32>", bias: add_bias}}',
        '{source: kernels/k.cu, options: ["-rdc=true"], symbols: {call: call}}').replace(
        "{scale: {threads: 128}, bias: {threads: 128}}", "{call: {threads: 32}}"))
    git(repo, "commit", "-qam", "a kernel calling a helper")
    edit(repo, "x * a + 1.0f", "x * a + 2.0f")
    result, found = verdicts(repo)
    assert found[("call", "sm_80")] == found[("call", "sm_90")] == CHANGED
    diff = next(r.diff for r in result.results if r.sm == "sm_90")
    assert "   section _Z6helperff:" in diff and any(line.strip().startswith("+FFMA") for line in diff), diff
