"""Controls as patches: a unified diff applied exactly to the production source, refused by file:line where it does
not apply or changes no machine code; production kernels hold no fault hooks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.contract.patches import PatchError, apply, make
from kcontract.errors import ContractError
from kcontract.toolchain.units import contract_uses, group_units
from tests.helpers.cli import kcontract, no_traceback
from tests.helpers.comment_controls import KERNEL_FILES, comment_project, refusal

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "".join(f"line {i}\n" for i in range(1, 31))


def test_a_patch_applies_exactly_and_after_earlier_edits_moved_its_lines():
    changed = SOURCE.replace("line 5\n", "line 5 changed\n").replace("line 20\n", "line 20 changed\n")
    patch = make(SOURCE, changed, "kernels/k.cu")
    assert patch.startswith("--- a/kernels/k.cu\n+++ b/kernels/k.cu\n@@ -2,7 +2,7 @@")
    assert apply(SOURCE, patch, "k.cu") == changed
    moved = "extra 1\nextra 2\n" + SOURCE  # the source grew above the hunks: they still match, once each
    assert apply(moved, patch, "k.cu") == "extra 1\nextra 2\n" + changed


def test_a_patch_that_does_not_apply_names_its_line_and_what_differed():
    patch = make(SOURCE, SOURCE.replace("line 20\n", "line 20 changed\n"), "kernels/k.cu")
    with pytest.raises(PatchError) as caught:
        apply(SOURCE.replace("line 19\n", "line nineteen\n"), patch, "k.cu")
    assert caught.value.line == 3  # the hunk header
    assert caught.value.message == ("does not apply to k.cu: line 19 is 'line nineteen', the patch expects 'line 19'; "
                                    "it matches nowhere else")
    with pytest.raises(PatchError, match=r"edits 'a/kernels/k.cu', not the kernel's source 'other.cu'"):
        apply(SOURCE, patch, "other.cu")
    with pytest.raises(PatchError, match=r"a hunk of 7 old and 7 new lines as its header says, found 6 and 6"):
        apply(SOURCE, patch.replace(" line 23\n", ""), "k.cu")


CONTRACT = """version: 1
seed: 5
targets: [sm_80, sm_90]
entries:
  - name: tiny
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/tiny.cu, symbols: {scale: "tiny_scale<32>", round: tiny_round}}}
    launch: {scale: {threads: 128, dynamic_smem: 65536}, round: {threads: 256}}
controls:
  - name: planted
    entry: tiny
    gate: 5
    fault: FAULT
    patch: PATCH
"""


def project(tmp_path: Path, patch_text: str, fault: str = "a planted edit") -> Path:
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "controls").mkdir(exist_ok=True)
    shutil.copy(ROOT / "tests" / "cuda" / "tiny.cu", tmp_path / "kernels" / "tiny.cu")
    shutil.copytree(ROOT / "tests" / "families", tmp_path / "tests" / "families", dirs_exist_ok=True)
    shutil.copy(ROOT / "tests" / "__init__.py", tmp_path / "tests")
    (tmp_path / "controls" / "planted.patch").write_text(patch_text)
    contract = tmp_path / "contract.yaml"
    contract.write_text(CONTRACT.replace("PATCH", "controls/planted.patch").replace("FAULT", fault))
    return contract


def tiny_patch(old: str, new: str) -> str:
    source = (ROOT / "tests" / "cuda" / "tiny.cu").read_text()
    assert source.count(old) == 1
    return make(source, source.replace(old, new), "kernels/tiny.cu")


def test_a_patched_control_compiles_as_its_own_unit_and_goes_red(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    contract = project(tmp_path, tiny_patch("v * a;", "v * a * 2.0f;"))
    loaded = load_contract(str(contract))
    assert loaded.controls[0].kernel.cuda.patch == "controls/planted.patch"
    units = group_units(contract_uses(loaded))
    assert [u.shown for u in units] == ["kernels/tiny.cu", "kernels/tiny.cu with controls/planted.patch"]
    runner = CliRunner()
    assert runner.invoke(cli, ["records", "--update", "--contract", str(contract)]).exit_code == 0
    done = runner.invoke(cli, ["check", "--contract", str(contract)])
    assert done.exit_code == 0, done.output
    assert "control planted (gate 5, for tiny): red as planted: stale against tiny's record" in done.output


def test_a_patch_that_does_not_apply_is_a_load_error_at_its_line(tmp_path):
    contract = project(tmp_path, tiny_patch("v * a;", "v * a * 2.0f;").replace(" ", "  ", 1).replace(
        "v * a;", "v * b;", 1))
    with pytest.raises(ContractError) as caught:
        load_contract(str(contract))
    assert re.fullmatch(rf"{re.escape(str(contract))}:14: controls\[0\]\.patch: a patch that applies exactly: "
                        r"controls/planted\.patch:3: does not apply to tiny\.cu: line \d+ is .*", caught.value.message), \
        caught.value.message


def test_a_patch_that_changes_no_machine_code_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    contract = project(tmp_path, tiny_patch("// A small gate-5 test kernel", "// A tiny gate-5 test kernel"))
    CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)])
    done = CliRunner().invoke(cli, ["check", "--contract", str(contract)])
    assert done.exit_code == 2, done.output
    errors = [line for line in done.output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and re.search(refusal("kernels/tiny.cu", "sm_80, sm_90"), errors[0]), done.output


@pytest.mark.parametrize("source", KERNEL_FILES)
def test_a_comment_only_control_is_refused_on_every_kernel_file(tmp_path, source):
    """Each control's cubin holds one entry's instantiations, the entries' all of them: the compiler numbers its
    internal functions differently in the two, and the machine code is still the same (judged on sm_90a, where
    every kernel file compiles to its real code)."""
    contract = comment_project(tmp_path, source, ["sm_90a"])
    assert CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)]).exit_code == 0
    done = CliRunner().invoke(cli, ["check", "--contract", str(contract)])
    assert done.exit_code == 2, done.output
    errors = [line for line in done.output.splitlines() if line.startswith("ERROR")]
    controls = len(load_contract(str(contract), import_kernels=False).controls)
    assert controls > 1 and len(errors) == controls, done.output
    for index, line in enumerate(errors):
        assert re.search(refusal(source, "sm_90a", index), line), line


def test_the_console_script_refuses_a_comment_only_rmsnorm_control_on_every_target(tmp_path):
    targets = load_contract(str(ROOT / "contract.yaml"), import_kernels=False).targets
    contract = comment_project(tmp_path, "kernels/rms_norm.cu", targets)
    assert kcontract("records", "--update", "--contract", str(contract), cwd=tmp_path).returncode == 0
    done = kcontract("check", "--contract", str(contract), cwd=tmp_path)
    no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2, errors  # rms_norm<256> and rms_norm<512>: a control on each
    for index, line in enumerate(errors):
        assert re.search(refusal("kernels/rms_norm.cu", "sm_80, .*sm_90a, .*", index), line), line


def test_a_comment_that_moves_code_changes_a_cubins_bytes_but_not_its_machine_code(tmp_path):
    from kcontract.mutate.campaign import changed_code
    from kcontract.sassdiff.same_code import same_bytes
    from kcontract.toolchain.build import build
    from kcontract.toolchain.cache import CompileCache
    from kcontract.toolchain.units import Unit

    text = (ROOT / "kernels" / "rms_norm.cu").read_text()
    for header in (ROOT / "kernels").glob("*.cuh"):
        shutil.copy(header, tmp_path)
    (tmp_path / "a.cu").write_text(text)
    (tmp_path / "b.cu").write_text("// a comment-only mutant\n" + text)
    units = [Unit(name, tmp_path / name, (), ("rms_norm<256>",), ("t",)) for name in ("a.cu", "b.cu")]
    cache = CompileCache(tmp_path / "cache")
    built = build(units, ["sm_90"], cache, tmp_path, jobs=1)
    a, b = (built.module(u, "sm_90") for u in units)
    assert not same_bytes(a, b, "rms_norm<256>")  # NVRTC's cubin differs in bytes
    assert changed_code(a, b, cache) == []  # mutate counts such a mutant equivalent


def test_a_control_needs_a_patch_or_a_kernel(tmp_path):
    contract = project(tmp_path, tiny_patch("v * a;", "v * a * 2.0f;"))
    contract.write_text(contract.read_text().replace("    patch: controls/planted.patch\n", ""))
    with pytest.raises(ContractError, match=r"controls\[0\]: a `patch` of the entry's kernel, or a `kernel` of the "
                                            r"control's own, given: neither"):
        load_contract(str(contract))


def test_the_repository_controls_are_patches_and_its_kernels_hold_no_hooks():
    kernels = sorted((ROOT / "kernels").glob("*.cu*")) + sorted((ROOT / "kernels").glob("*.py"))
    for path in kernels:
        text = path.read_text()
        assert not re.search(r"\b(WD|WP|WF)_[A-Z_]+\b", text), path
        assert not re.search(r"#\s*if(n?def)?\b(?!.*__CUDA_ARCH)", text), (path, "a switch on anything but the SM")
    assert not list((ROOT / "controls").glob("*.cu")) and not list((ROOT / "controls").glob("*.py")), \
        "controls are patches, not sources that include a kernel"
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    for control in loaded.controls:
        cuda = control.kernel.compiled
        entry = loaded.entry(control.entry).kernel.compiled
        assert cuda.source == entry.source, control.name
        assert cuda.patch or cuda.launch != entry.launch, control.name  # a patch, or a launch of its own


def test_check_compiles_a_launching_control_for_its_first_sm_alone_where_its_code_changes(tmp_path, monkeypatch):
    """The eps control's code changes on sm_90a, so check compiles it nowhere else; the entry on both targets."""
    from tests.helpers.launching_controls import launching_project

    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    contract = launching_project(tmp_path)
    assert CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)]).exit_code == 0
    done = CliRunner().invoke(cli, ["check", "--contract", str(contract)])
    assert done.exit_code == 0, done.output
    assert "3 compiles (1 source x 2 SMs and 1 control on sm_90a, " in done.output, done.output


def test_check_refuses_a_comment_only_launching_control_on_every_target_it_compiled_afterwards(tmp_path, monkeypatch):
    """Unchanged on sm_90a, the comment control is compiled for sm_80 too before it is refused on both."""
    from tests.helpers.launching_controls import launching_project

    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    contract = launching_project(tmp_path, comment=True)
    CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)])
    done = CliRunner().invoke(cli, ["check", "--contract", str(contract)])
    assert done.exit_code == 2, done.output
    errors = [line for line in done.output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and re.search(refusal("kernels/rms_norm.cu", "sm_80, sm_90a", 1), errors[0]), done.output


def test_check_fails_on_a_launching_control_that_does_not_compile_naming_every_target(tmp_path, monkeypatch):
    """A control that fails on its first SM is compiled for every target, and each failure is the check's."""
    from tests.helpers.launching_controls import launching_project

    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    contract = launching_project(tmp_path, broken=True)
    CliRunner().invoke(cli, ["records", "--update", "--contract", str(contract)])
    done = CliRunner().invoke(cli, ["check", "--contract", str(contract)])
    assert done.exit_code != 0 and "Traceback" not in done.output, done.output
    failed = [line for line in done.output.splitlines() if "broken.patch does not compile" in line]
    assert len(failed) == 1 and "sm_80" in failed[0] and "sm_90a" in failed[0], done.output
    assert "SUMMARY check FAILED" in done.output, done.output
