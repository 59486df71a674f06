"""`kcontract init` through the installed console script, as a user runs it: a new contract that lists and runs,
an entry appended with the file's comments and entries kept, refusals as one ERROR line with the file untouched,
CUDA entries that load as written, and the example family's template by `package.module:Class`."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kcontract.contract.model import Entry
from kcontract.family.registry import family_class, family_names

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rowsum"
KCONTRACT = shutil.which("kcontract", path=str(Path(sys.executable).parent)) or "kcontract"
DOUBLE = "tests.doubles.decode:window_decode"
SPLIT = ("--function", "partials=window_decode_partials<{head_dim}, {group}>",
         "--function", "merge=window_decode_merge<{head_dim}, {group}>")


def kcontract(*args: str, cwd: Path = ROOT, repo_imports: bool = False) -> subprocess.CompletedProcess:
    """The console script with no TTY; `repo_imports` puts this repository on the path (the test doubles live
    here, while the contracts under test live in temporary folders)."""
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("PYTHONPATH", None)
    if repo_imports:
        env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([KCONTRACT, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, check=False)


def one_error(done: subprocess.CompletedProcess) -> str:
    """The refusal's single ERROR line (exit 2, no traceback)."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(errors) == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    return errors[0]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The rowsum example, copied so the contract can be appended to."""
    folder = tmp_path / "rowsum"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".kcontract-cache", "receipts"))
    return folder


def test_a_new_contract_lists_and_runs(tmp_path):
    contract = tmp_path / "contract.yaml"
    done = kcontract("init", "--contract", str(contract), "--family", "attention.decode", "--python", DOUBLE,
                     repo_imports=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"kcontract list --contract {contract}" in done.stdout
    assert f"kcontract run --contract {contract} --only window_decode" in done.stdout
    listed = kcontract("list", "--contract", str(contract), repo_imports=True)
    assert listed.returncode == 0 and "window_decode" in listed.stdout, listed.stdout + listed.stderr
    ran = kcontract("run", "--contract", str(contract), "--no-controls", "--jobs", "2", repo_imports=True)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert ran.stdout.strip().splitlines()[-1].startswith("SUMMARY 1 kernels: 1 pass gates 1-4, 0 fail")


def test_an_entry_is_appended_with_the_files_comments_and_entries_kept(example):
    contract = example / "contract.yaml"
    before = contract.read_text()
    done = kcontract("init", "--family", "rowsum.family:RowSum", "--python", "rowsum.kernels:rowsum", "--name",
                     "second", cwd=example)
    assert done.returncode == 0, done.stdout + done.stderr
    after = contract.read_text()
    ops = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False).get_opcodes()
    assert [op[0] for op in ops] == ["equal", "insert", "equal"], ops  # one block added, nothing else changed
    added = after.splitlines()[ops[1][3]:ops[1][4]]
    assert "  - name: second" in added and after.index("name: second") < after.index("controls:")
    listed = kcontract("list", cwd=example)
    assert listed.returncode == 0 and "rowsum_np" in listed.stdout and "second" in listed.stdout, listed.stderr
    ran = kcontract("run", "--only", "second", "--no-controls", "--jobs", "2", cwd=example)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]

    again = kcontract("init", "--family", "rowsum.family:RowSum", "--python", "rowsum.kernels:rowsum", "--name",
                      "second", cwd=example)
    assert "already has an entry 'second'" in one_error(again) and contract.read_text() == after


def test_items_at_the_first_column_and_comments_around_them(example):
    contract = example / "mine.yaml"
    contract.write_text("version: 1\nseed: 3\nentries:\n# the first kernel\n- name: first\n  family: "
                        "rowsum.family:RowSum\n  kernel: {python: \"rowsum.kernels:rowsum\"}\n  cases: [{name: a, "
                        "length: 100, rows: 2}]  # short\n\n# nothing after the entries but this comment\n")
    done = kcontract("init", "--contract", "mine.yaml", "--family", "rowsum.family:RowSum", "--python",
                     "rowsum.kernels:rowsum", cwd=example)
    assert done.returncode == 0, done.stdout + done.stderr
    text = contract.read_text()
    assert "\n- name: rowsum\n  family: rowsum.family:RowSum\n" in text
    assert text.endswith("\n# nothing after the entries but this comment\n") and "# the first kernel" in text
    assert kcontract("list", "--contract", "mine.yaml", cwd=example).returncode == 0


def test_cuda_entries_load_as_written(tmp_path, example):
    contract = tmp_path / "cuda.yaml"
    done = kcontract("init", "--contract", str(contract), "--family", "attention.decode", "--cuda",
                     "kernels/window_decode.cu", *SPLIT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kcontract records --contract" in done.stdout
    listed = kcontract("list", "--contract", str(contract))
    assert listed.returncode == 0 and "window_decode\t" in listed.stdout and "1 2 3 4 5" in listed.stdout

    (example / "rowsum.cu").write_text('extern "C" __global__ void rowsum_kernel(const unsigned short* x, float* '
                                       'out, int length) {}\n')
    done = kcontract("init", "--contract", "cuda.yaml", "--family", "rowsum.family:RowSum", "--cuda", "rowsum.cu",
                     "--function", "rowsum_kernel", cwd=example)
    assert done.returncode == 0, done.stdout + done.stderr
    assert kcontract("list", "--contract", "cuda.yaml", cwd=example).returncode == 0


def test_a_source_outside_the_contract_folder_is_included_in_a_new_contract_and_refused_by_an_old_one(tmp_path):
    contract = tmp_path / "proj" / "contract.yaml"
    contract.parent.mkdir()
    done = kcontract("init", "--contract", str(contract), "--family", "attention.decode", "--cuda",
                     "kernels/window_decode.cu", *SPLIT)
    assert done.returncode == 0, done.stdout + done.stderr
    before = contract.read_text()
    assert f"\ninclude: [{os.path.relpath(ROOT / 'kernels', contract.parent)}]  # the kernel's folder" in before
    (tmp_path / "other").mkdir()
    shutil.copy(ROOT / "kernels" / "window_decode.cu", tmp_path / "other" / "decode.cu")
    done = kcontract("init", "--contract", str(contract), "--family", "attention.decode", "--cuda",
                     str(tmp_path / "other" / "decode.cu"), *SPLIT, "--name", "other")
    error = one_error(done)
    assert "kernel.cuda.source: a file under the contract's folder" in error and "add its folder to `include:`" in \
        error and error.endswith("(in the would-be contract; nothing written)"), error
    assert contract.read_text() == before


def test_the_families_are_listed_one_line_each():
    done = kcontract("init", "--list-families")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:2]] == ["attention.decode", "attention.prompt"]
    unknown = kcontract("init", "--contract", "x.yaml", "--family", "no.such:Family", "--python", "a:b")
    assert "no such family" in one_error(unknown) and "attention.prompt" in unknown.stderr
    assert not (ROOT / "x.yaml").exists()


@pytest.mark.parametrize(("args", "says"), [
    (("--family", "attention.decode", "--python", "no_such_module:kernel"), "no module named 'no_such_module'"),
    (("--family", "attention.decode", "--python", "tests.doubles.decode:f32_of_bf16"), "the ABI's arguments"),
    (("--family", "attention.decode", "--cuda", "kernels/missing.cu", "--function", "f"), "no such file"),
    (("--family", "attention.decode", "--cuda", "kernels/window_decode.cu", "--function", "f"),
     "--function ROLE=NAME for each of partials, merge"),
    (("--family", "attention.decode", "--cuda", "kernels/window_decode.cu", "--function", "partials=nowhere",
      "--function", "merge=window_decode_merge"), "has no `nowhere`"),
    (("--family", "attention.decode"), "give exactly one kernel"),
], ids=["missing-module", "wrong-parameters", "missing-cu", "roles", "unknown-function", "no-kernel"])
def test_bad_input_is_one_error_line_and_writes_nothing(tmp_path, args, says):
    contract = tmp_path / "contract.yaml"
    done = kcontract("init", "--contract", str(contract), *args, repo_imports=True)
    assert says in one_error(done) and done.stderr.count("\n") == 1
    assert not contract.exists() and not list(tmp_path.iterdir())


def test_a_family_without_a_template_and_a_broken_contract_are_refused(example):
    (example / "plain.py").write_text("from kcontract.family.base import Family\nfrom rowsum.family import RowSum\n\n\n"
                                      "class Plain(RowSum):\n    name = 'plain'\n    template = "
                                      "classmethod(Family.template.__func__)\n")
    done = kcontract("init", "--contract", "new.yaml", "--family", "plain:Plain", "--python", "rowsum.kernels:rowsum",
                     cwd=example)
    assert "family plain gives no entry template" in one_error(done) and not (example / "new.yaml").exists()

    contract = example / "contract.yaml"
    contract.write_text(contract.read_text().replace("version: 1", "version: 2"))
    before = contract.read_text()
    done = kcontract("init", "--family", "rowsum.family:RowSum", "--python", "rowsum.kernels:rowsum", "--name", "x",
                     cwd=example)
    assert "fix it first" in one_error(done) and contract.read_text() == before


@pytest.mark.parametrize("name", family_names())
def test_every_installed_familys_template_validates(name):
    cls = family_class(name)
    data = yaml.safe_load(cls.template())
    assert isinstance(data, dict) and not set(data) & set(Entry.model_fields)
    family = cls("entry", cls.Spec.model_validate_json(json.dumps(data), strict=True), 0)
    assert family.launch_shapes() and family.kernel_abi()
