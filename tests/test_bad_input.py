"""Bad input as a new user gives it: one clear line and exit 2, before any work; files made as the umask says."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import pytest

from tests.helpers.cli import kcontract, no_traceback, warm_bytecode
from tests.helpers.outside import PYTHON_ENTRY, PYTHON_KERNEL, SECRET, cuda_entry, make_project


def test_a_contract_nested_hundreds_deep_is_refused_in_one_line(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("version: 1\nseed: 1\nentries: " + "[" * 500 + "]" * 500 + "\n")
    done = kcontract("check", "--contract", str(deep))
    no_traceback(done)
    assert done.returncode == 2 and "deep.yaml:3: collections nested at most 50 deep" in done.stderr, done.stderr
    plugin = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kcontract", str(deep)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "INTERNALERROR" not in plugin.stdout + plugin.stderr and "nested at most 50 deep" in plugin.stdout + \
        plugin.stderr, plugin.stdout[-2000:] + plugin.stderr[-2000:]


def test_a_contract_too_large_is_refused_before_it_is_parsed(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("version: 1\nseed: 1\nentries:\n" + "  - {name: e, family: rmsnorm}\n" * 200_000)
    done = kcontract("check", "--contract", str(big))
    no_traceback(done)
    assert done.returncode == 2 and "a contract of at most 4 MiB (checked before parsing)" in done.stderr
    assert f"{big.stat().st_size:,} bytes" in done.stderr


def test_init_and_the_cache_make_files_as_the_umask_says(tmp_path):
    (tmp_path / "k.py").write_text(PYTHON_KERNEL)
    old = os.umask(0o022)
    try:
        done = kcontract("init", "--family", "rmsnorm", "--python", "k:f", cwd=tmp_path,
                         env={"KCONTRACT_CACHE": str(tmp_path / "cache")})
        assert done.returncode == 0, done.stderr
        assert stat.S_IMODE((tmp_path / "contract.yaml").stat().st_mode) == 0o644
        assert "kcontract check --contract contract.yaml   # once a control plants a fault in f" in done.stdout
        ran = kcontract("run", "--gate", "1", cwd=tmp_path, env={"KCONTRACT_CACHE": str(tmp_path / "cache")})
        assert ran.returncode == 1, ran.stdout[-2000:]  # the kernel writes nothing: red, and the cache is filled
        made = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and not p.name.endswith(".lock")]
        assert made and {stat.S_IMODE(p.stat().st_mode) for p in made} == {0o644}
    finally:
        os.umask(old)


def test_check_counts_in_words_and_says_what_would_give_it_something_to_check(tmp_path):
    (tmp_path / "k.py").write_text(PYTHON_KERNEL)
    assert kcontract("init", "--family", "rmsnorm", "--python", "k:f", cwd=tmp_path).returncode == 0
    done = kcontract("check", cwd=tmp_path, env={"KCONTRACT_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 1
    assert "contract valid (1 entry, 0 controls)" in done.stdout
    assert "register a CUDA kernel, or a control for a Python one" in done.stdout


def test_a_seed_that_is_no_number_is_named_as_one(tmp_path):
    done = kcontract("run", "--seed", "abc", cwd=tmp_path)
    assert done.returncode == 2 and "'abc' is not a seed: a whole number from 0 to" in done.stderr, done.stderr


def test_a_module_not_found_names_the_folders_searched(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "k.py").write_text(PYTHON_KERNEL)
    (tmp_path / "sub" / "contract.yaml").write_text(
        "version: 1\nseed: 1\nentries:\n  - name: f\n    family: rmsnorm\n    kernel: {python: \"k:f\"}\n"
        "    cases:\n      - {name: h8, hidden: 8, rows: 1}\n")
    done = kcontract("list", "--contract", "sub/contract.yaml", cwd=tmp_path)
    assert done.returncode == 2 and f"no module named 'k' in {tmp_path / 'sub'} or on the Python path" in \
        done.stderr, done.stderr


@pytest.mark.parametrize("args, said", [
    (["nope"], "kcontract: no such command 'nope' (kcontract --help)"),
    (["run", "--nope"], "kcontract run: no such option '--nope'"),
    (["run", "--jobs", "x"], "kcontract run: --jobs: 'x' is not a worker count from 1 to 64 or 'auto' "
                             "(kcontract run --help)"),
    (["run", "--jobs"], "kcontract run: option '--jobs' requires an argument (kcontract run --help)"),
    (["run", "--gate", "9"], "kcontract run: --gate: 9 is not in the range 1<=x<=5 (kcontract run --help)"),
    (["run", "extra"], "kcontract run: got unexpected extra argument (extra) (kcontract run --help)"),
    (["check", "--jobs", "0"], "kcontract check: --jobs: '0' is not a worker count from 1 to 64 or 'auto'"),
    (["drift"], "kcontract drift: missing argument 'TARGET' (kcontract drift --help)"),
    (["drift", "m:f", "--dtype", "f"], "kcontract drift: --dtype: 'f' is not one of 'float32', 'bfloat16', "
                                      "'float16' (kcontract drift --help)"),
    (["receipt", "merge", "--output"], "kcontract receipt merge: option '--output' requires an argument"),
    (["receipt", "nope"], "kcontract receipt: no such command 'nope' (kcontract receipt --help)"),
])
def test_a_usage_error_is_one_line_naming_the_command_and_option(tmp_path, args, said):
    warm_bytecode()
    started = os.times()
    done = kcontract(*args, cwd=tmp_path)
    ended = os.times()
    no_traceback(done)
    assert done.returncode == 2 and done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert said in done.stderr and not done.stdout, done.stderr
    cpu = ended.children_user + ended.children_system - started.children_user - started.children_system
    assert cpu < 2.0  # the command's own seconds, which other processes on a loaded machine do not stretch


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path)


BAD_INPUT = [  # (what, contract text, what its one ERROR line says after `contract.yaml:`)
    ("a NUL byte", "version: 1\nseed: 1\x00\nentries: []\n", "2:8: a control character, U+0000 (NUL)"),
    ("a BEL in a comment", "# rings \x07 a bell\nversion: 1\n", "1:9: a control character, U+0007 (BEL)"),
    ("a DEL in a key", "version: 1\nse\x7fed: 1\n", "2:3: a control character, U+007F (DEL)"),
    ("a source up and out", cuda_entry("../elsewhere/secret.cu"), "6: entries[0].kernel.cuda.source: a file under"),
    ("a source by absolute path", cuda_entry("/etc/passwd"), "6: entries[0].kernel.cuda.source: a file under"),
    ("/etc/shadow", cuda_entry("/etc/shadow"), "6: entries[0].kernel.cuda.source: a file under"),
    ("a link out", cuda_entry("linked.cu"), "6: entries[0].kernel.cuda.source: a file under"),
    ("a linked folder", cuda_entry("linked/secret.cu"), "6: entries[0].kernel.cuda.source: a file under"),
    ("a header folder out", cuda_entry("k.cu", ", options: [-I../elsewhere]"),
     "6: entries[0].kernel.cuda.options[0]: a folder under"),
    ("a header out", cuda_entry("k.cu", ", options: [-include, ../elsewhere/secret.cuh]"),
     "6: entries[0].kernel.cuda.options[1]: a file under"),
    ("a patch out", cuda_entry("k.cu") + "controls:\n  - {name: c, entry: f, gate: 1, fault: x, "
     "patch: ../elsewhere/secret.patch}\n", "10: controls[0].patch: a file under"),
    ("an include folder that is not there", "include: [../nowhere]\n" + PYTHON_ENTRY,
     "1: include[0]: an existing folder"),
]


@pytest.mark.parametrize("text, says", [row[1:] for row in BAD_INPUT], ids=[row[0] for row in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2_within_two_seconds(project, text, says):
    (project / "contract.yaml").write_text(text)
    started = time.monotonic()
    done = kcontract("check", cwd=project, env={"KCONTRACT_CACHE": str(project.parent / "cache")})
    seconds = time.monotonic() - started
    no_traceback(done)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.startswith(f"ERROR: contract.yaml:{says}"), done.stderr
    assert SECRET not in done.stdout + done.stderr and "root:" not in done.stderr
    assert seconds < 2, f"{seconds:.1f} s"


def test_a_path_outside_says_how_to_let_it_in(project):
    (project / "contract.yaml").write_text(cuda_entry("../elsewhere/secret.cu"))
    done = kcontract("list", cwd=project)
    assert done.returncode == 2 and done.stderr == (
        f"ERROR: contract.yaml:6: entries[0].kernel.cuda.source: a file under the contract's folder {project} or a "
        f"folder that `include:` names; move the file there, or add its folder to `include:`, given: "
        f"'../elsewhere/secret.cu'\n"), done.stderr
    (project / "contract.yaml").write_text("include: [../elsewhere]\n" + cuda_entry("../elsewhere/secret.cu"))
    assert kcontract("list", cwd=project).returncode == 0


LOADING = [("check",), ("list",), ("run", "--gate", "1"), ("records",), ("receipt", "check"), ("sass-diff",),
           ("review", "--base", "HEAD"),
           ("coverage", "f"), ("mutate", "f"), ("bench",),
           ("init", "--family", "rmsnorm", "--python", "k:f", "--name", "g")]


def test_a_control_character_is_one_line_for_every_command_and_the_plugin(project):
    (project / "contract.yaml").write_text(PYTHON_ENTRY.replace("rows: 1", "rows: 1\x00"))
    for git in (["init", "-q"], ["add", "contract.yaml", "k.py"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", *git], cwd=project, check=True)  # sass-diff compares revisions
    for args in LOADING:
        done = kcontract(*args, cwd=project, env={"KCONTRACT_CACHE": str(project.parent / "cache")})
        no_traceback(done)
        assert done.returncode == 2 and "contract.yaml:8:38: a control character, U+0000 (NUL)" in done.stderr, \
            (args, done.stderr[-2000:])
    plugin = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kcontract",
                             "contract.yaml"], cwd=project, capture_output=True, text=True, timeout=300)
    both = plugin.stdout + plugin.stderr
    assert "INTERNALERROR" not in both and "contract.yaml:8:38: a control character, U+0000 (NUL)" in both, \
        both[-2000:]
