"""The installed `kcontract` console script as a user runs it: no PYTHONPATH, any folder, 80 columns, no terminal,
bad input, replays and Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers.cli import SCRIPT, kcontract, no_traceback

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "tests" / "contracts" / "cpu.yaml"
def write_contract(tmp_path: Path, body: str) -> Path:
    """A contract in tmp_path beside a copy of this repository's test doubles (its Python kernels)."""
    (tmp_path / "tests").mkdir(exist_ok=True)
    shutil.copy(ROOT / "tests" / "__init__.py", tmp_path / "tests")
    shutil.copytree(ROOT / "tests" / "doubles", tmp_path / "tests" / "doubles", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "contract.yaml"
    path.write_text(body)
    return path


ENTRY = """version: 1
seed: 3
entries:
  - name: dec
    family: attention.decode
    kernel: {python: "%s"}
    shape: {head_dim: 128, q_heads: 2, kv_heads: 1}
    stress: {chunks: 3}
    mirror: {max_keys: 300}
    cases:
      - {name: small, cache: {kind: linear, length: 300}, rows: [299, 17]}
"""


def test_cpu_contract_from_the_repository_root_at_80_columns(cpu_contract_run):
    proc, report = cpu_contract_run.proc, cpu_contract_run.report
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    no_traceback(proc)
    assert "SUMMARY 5 kernels: 5 pass gates 1-4, 0 fail, 0 known findings; 20 controls: 20 red as planted, " \
           "0 missed; 0 limit problems" in proc.stdout
    assert "…" not in proc.stdout + proc.stderr  # nothing truncated
    for entry in ("np_decode_d128_g4", "np_decode_d512_g16", "np_decode_d256_g3", "np_prompt_d256_g2_sliding",
                  "np_prompt_d128_g4"):
        for gate in (1, 2, 3, 4):
            assert re.search(rf"^{entry} gate {gate} .*: pass, \d+ ", proc.stdout, re.M), (entry, gate)
    assert len([line for line in proc.stderr.splitlines() if "red as planted at gate" in line]) == 20
    doc = json.loads(report.read_text())
    for control in doc["controls"]:
        red = [int(g) for g, r in control["gates"].items() if not r["passed"]]
        assert control["status"] == "ran" and doc["planted"][control["task"]["name"]] in red, control["task"]
    for entry in doc["entries"]:
        for gate, result in entry["gates"].items():
            assert result["passed"] and result["checked"] > 0, (entry["task"]["name"], gate)
            assert result["checked"] == result["bit_equal"] + result["within"] + result["failures"]


def test_the_json_timeline_has_every_task_on_the_workers_in_order(cpu_contract_run):
    doc = json.loads(cpu_contract_run.report.read_text())
    timeline = doc["timeline"]
    ran = {(o["task"]["kind"], o["task"]["name"], g) for o in doc["entries"] + doc["controls"] for g in o["gates"]}
    assert {(t["kind"], t["name"], str(g)) for t in timeline for g in t["gates"]} == ran
    assert all(0 <= t["ready_s"] <= t["start_s"] <= t["end_s"] for t in timeline), timeline
    assert [t["start_s"] for t in timeline] == sorted(t["start_s"] for t in timeline)
    assert {t["slot"] for t in timeline} == {0, 1}  # --jobs 2
    for slot in (0, 1):  # a slot runs one task at a time
        mine = [t for t in timeline if t["slot"] == slot]
        assert all(a["end_s"] <= b["start_s"] for a, b in zip(mine, mine[1:])), mine
    assert all("spans" not in o for o in doc["entries"] + doc["controls"])  # rows keep no timing of the pool


def test_aborting_and_hanging_kernels_are_reported_and_the_run_goes_on():
    proc = kcontract("run", "--contract", "tests/contracts/faulty.yaml", timeout=300)
    assert proc.returncode == 1
    assert ("SUMMARY 4 kernels: 2 pass gates 1-4, 2 fail, 0 known findings; 0 controls: 0 red as planted, "
            "0 missed; 0 limit problems") in proc.stdout, proc.stdout + proc.stderr
    assert re.search(r"^aborts gate \d: crashed: worker died \(signal SIGABRT\)", proc.stdout, re.M), proc.stdout
    assert re.search(r"^hangs gate \d: timed out: no answer within 3 s \(the timeout of each gate\)", proc.stdout,
                     re.M), proc.stdout
    assert re.search(r"^after gate 4 exact-sum inputs: pass", proc.stdout, re.M)
    no_traceback(proc)


def test_another_folder_with_a_contract_path(tmp_path):
    proc = kcontract("run", "--contract", str(ROOT / "tests" / "contracts" / "faulty.yaml"), "--only", "before",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SUMMARY 1 kernels: 1 pass gates 1-4" in proc.stdout
    check = kcontract("check", "--contract", str(ROOT / "tests" / "contracts" / "gate5" / "contract.yaml"),
                      cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUMMARY check passed" in check.stdout


def test_gate_5_runs_alone_with_its_controls():
    proc = kcontract("run", "--contract", "tests/contracts/gate5/contract.yaml", "--gate", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^tiny gate 5 launch records: pass, 14 symbol x SM rows, 0 failures", proc.stdout, re.M)
    assert "2 controls: 2 red as planted, 0 missed" in proc.stdout


def test_the_repository_contract_needs_a_gpu_and_says_what_runs_without_one():
    if _gpu():
        pytest.skip("a GPU is present: `kcontract run` runs the contract there")
    proc = kcontract("run")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "need a CUDA GPU" in proc.stderr and "kcontract check" in proc.stderr
    no_traceback(proc)


def _gpu() -> bool:
    from kcontract.launch import gpu_present

    return gpu_present()


def test_every_replay_command_runs_and_reproduces():
    proc = kcontract("run", "--contract", "tests/contracts/replay.yaml")
    assert proc.returncode == 1
    replays = re.findall(r"^  replay: (kcontract .*)$", proc.stderr, re.M)
    worsts = re.findall(r"^  worst: (.*)$", proc.stderr, re.M)
    assert len(replays) == 3 and len(worsts) == 3, proc.stderr
    for replay, worst in zip(replays, worsts):
        args = replay.split()[1:]
        again = kcontract(*args)
        assert again.returncode == 1, (replay, again.stderr)
        assert f"  worst: {worst}" in again.stderr, (replay, again.stderr)
        gate = args[args.index("--gate") + 1]
        assert re.search(rf"^no_rescale gate {gate} .*: FAIL", again.stdout, re.M)


@pytest.mark.parametrize("target, expected", [
    ("tests.doubles.faulty:no_such_kernel", "entries[0].kernel.python: a function of tests.doubles.faulty; it has "
                                            "no attribute 'no_such_kernel'"),
    ("tests.doubles.faulty:NOT_A_FUNCTION", "entries[0].kernel.python: a callable; tests.doubles.faulty."
                                            "NOT_A_FUNCTION is a int"),
    ("tests.doubles.faulty:wrong_signature", "entries[0].kernel.python: a function taking the ABI's arguments by "
                                             "keyword"),
    ("tests.doubles.nowhere:f", "entries[0].kernel.python: an importable module:function; no module named "
                                "'tests.doubles.nowhere'"),
])
@pytest.mark.parametrize("command", ["run", "check"])
def test_bad_kernel_references_are_one_line_and_exit_2(tmp_path, target, expected, command):
    contract = write_contract(tmp_path, ENTRY % target)
    proc = kcontract(command, "--contract", str(contract), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"ERROR: {contract}:6: {expected}"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    no_traceback(proc)


@pytest.mark.parametrize("target, line", [
    ("tests.doubles.faulty:raises", "kernel tests.doubles.faulty:raises raised ValueError: out[b] = 1 failed [/] "
                                    "here in call small"),
    ("tests.doubles.faulty:writes_floats", "kernel tests.doubles.faulty:writes_floats in call small: out: expected "
                                           "uint16 bf16 bits of shape (2, 2, 128), given float32 (2, 2, 128)"),
])
def test_a_failing_kernel_is_one_line_naming_the_call(tmp_path, target, line):
    contract = write_contract(tmp_path, ENTRY % target)
    proc = kcontract("run", "--contract", str(contract), "--junit", str(tmp_path / "j.xml"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"dec gate 1: error: {line}" in proc.stdout
    no_traceback(proc)
    junit = (tmp_path / "j.xml").read_text()
    assert 'message="error: kernel tests.doubles.faulty:' in junit
    verbose = kcontract("run", "--contract", str(contract), "--verbose", cwd=tmp_path)
    assert "Traceback" in verbose.stderr if "raises" in target else "Traceback" not in verbose.stderr


def test_a_case_too_large_for_memory_is_refused_at_load(tmp_path):
    body = (ENTRY % "tests.doubles.decode:window_decode").replace("{kind: linear, length: 300}, rows: [299, 17]",
                                                                  "{kind: linear, length: 2000000000}, rows: [17]")
    proc = kcontract("run", "--contract", str(write_contract(tmp_path, body)), cwd=ROOT)
    assert proc.returncode == 2
    assert re.match(r"ERROR: .*contract.yaml:11: entries\[0\]\.cases\[0\]: a case that fits in memory: its largest "
                    r"call needs at least [\d.]+ TiB \([\d,]+ bytes\) and this machine has", proc.stderr), proc.stderr
    no_traceback(proc)


def test_a_cache_of_2_to_the_31_rows_is_refused_by_name(tmp_path):
    body = (ENTRY % "tests.doubles.decode:window_decode").replace("length: 300}, rows: [299, 17]",
                                                                  "length: 2147483648}, rows: [17]")
    proc = kcontract("check", "--contract", str(write_contract(tmp_path, body)), cwd=ROOT)
    assert proc.returncode == 2
    assert "entries[0].cases[0].cache.length: an integer <= 2147483647, given: 2147483648" in proc.stderr


@pytest.mark.parametrize("args, expected", [
    (["--json", "README.md/out.json"], "--json README.md/out.json: cannot create its folder"),
    (["--junit", "tests"], "--junit tests: is a directory"),
    (["--gate", "5"], "--gate 5: np_decode_d128_g4, np_decode_d256_g3, np_decode_d512_g16, np_prompt_d128_g4, "
                      "np_prompt_d256_g2_sliding runs no gate 5 (gate 5 checks launch records of CUDA kernels)"),
    (["--case", "nope"], "--case nope: np_decode_d128_g4, np_decode_d256_g3, np_decode_d512_g16, np_prompt_d128_g4, "
                         "np_prompt_d256_g2_sliding has no such case"),
    (["--only", "zzz*"], "--only zzz* matches no entry"),
    (["--control", "nope"], "--control nope: no such control"),
    (["--receipt", "/tmp/r.json", "--only", "np_*"], "--receipt attests the whole contract"),
])
def test_options_that_match_nothing_or_cannot_be_written_are_refused_before_the_run(args, expected):
    started = time.monotonic()
    proc = kcontract("run", "--contract", "tests/contracts/cpu.yaml", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"ERROR: {expected}"), proc.stderr
    assert "SUMMARY" not in proc.stdout and time.monotonic() - started < 30


def test_a_small_declared_scale_keeps_the_hard_selection_mirror_exact(tmp_path):
    body = (ENTRY % "tests.doubles.decode:window_decode").replace("    stress:", "    scale: 0.002\n    stress:")
    proc = kcontract("run", "--contract", str(write_contract(tmp_path, body)), "--gate", "4", cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^dec gate 4 exact-sum inputs: pass, \d+ checked, .* 0 failures", proc.stdout, re.M)


def test_help_lists_the_exit_codes():
    proc = kcontract("--help")
    assert proc.returncode == 0
    for code in ("0", "1", "2", "3", "130"):
        assert re.search(rf"^\s+{code}\s", proc.stdout, re.M), proc.stdout


def _as_in_a_terminal() -> None:
    """In the child before exec: SIGINT's default action, as a shell's foreground job has it (a background job of a
    script inherits it ignored, and kcontract, like any Unix program, leaves an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def test_ctrl_c_ends_every_worker_with_one_line_and_130():
    marker = f"KCONTRACT_TEST_MARK={uuid.uuid4().hex}"
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ[marker.split("=")[0]] = marker.split("=")[1]
    proc = subprocess.Popen([str(SCRIPT), "run", "--contract", str(CPU), "--jobs", "2", "--no-cache"], cwd=ROOT,
                            env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while len(_processes_with(marker)) < 2 and time.monotonic() < deadline:  # the parent and a worker at least
        time.sleep(0.2)
    assert len(_processes_with(marker)) >= 2, "the run's worker never started, or the run ended before the signal"
    time.sleep(2.0)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert re.fullmatch(r"interrupted: \d+ of \d+ tasks finished; nothing written", err.strip().splitlines()[-1]), err
    assert "Traceback" not in err and "EOFError" not in err and "KeyboardInterrupt" not in err, err
    assert "crashed" not in out + err, out + err  # workers ended by the interrupt did not crash
    time.sleep(0.5)
    assert _processes_with(marker) == [], "a worker outlived the interrupted run"


def _start_cpu_run(marker: str, *extra: str) -> subprocess.Popen:
    """`kcontract run` of the CPU contract on two workers, tagged so its processes can be found."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ[marker.split("=")[0]] = marker.split("=")[1]
    proc = subprocess.Popen([str(SCRIPT), "run", "--contract", str(CPU), "--jobs", "2", "--no-cache", *extra],
                            cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while len(_processes_with(marker)) < 2 and time.monotonic() < deadline:  # the parent and a worker at least
        time.sleep(0.2)
    assert len(_processes_with(marker)) >= 2, "the run's worker never started, or the run ended before the signal"
    time.sleep(2.0)
    return proc


@pytest.mark.parametrize("group", [False, True], ids=["the parent (timeout's way)", "the whole group"])
def test_sigterm_stops_quietly_with_one_line_and_130(group):
    marker = f"KCONTRACT_TEST_MARK={uuid.uuid4().hex}"
    proc = _start_cpu_run(marker)
    (os.killpg if group else os.kill)(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert re.fullmatch(r"interrupted: \d+ of \d+ tasks finished; nothing written", err.strip().splitlines()[-1]), err
    assert "Traceback" not in err and "BrokenPipe" not in err and "crashed" not in out + err, out + err
    time.sleep(0.5)
    assert _processes_with(marker) == [], "a worker outlived the terminated run"


def test_an_output_path_that_cannot_be_written_is_refused_and_a_missing_folder_is_made(tmp_path):
    proc = kcontract("run", "--contract", "tests/contracts/cpu.yaml", "--json", "/proc/kcontract.json")
    assert proc.returncode == 2 and "SUMMARY" not in proc.stdout, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ERROR: --json /proc/kcontract.json: not writable"), proc.stderr
    target = tmp_path / "new" / "deeper" / "run.json"
    proc = kcontract("run", "--contract", "tests/contracts/cpu.yaml", "--only", "np_decode_d256_g3",
                     "--no-controls", "--gate", "1", "--json", str(target))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"note: created {tmp_path / 'new'} for --json" in proc.stderr and target.is_file()


def _copy_contract(tmp_path: Path) -> Path:
    """tests/contracts/faulty.yaml's first entry, in a folder of its own beside the test doubles."""
    return write_contract(tmp_path, ENTRY % "tests.doubles.decode:window_decode")


def test_an_unwritable_cache_folder_falls_back_to_a_per_user_one_with_a_note(tmp_path):
    contract = _copy_contract(tmp_path)
    (tmp_path / ".kcontract-cache").write_text("a file where the cache folder would be")
    home = tmp_path / "xdg"
    proc = kcontract("run", "--contract", str(contract), "--gate", "1", cwd=tmp_path,
                     env={"XDG_CACHE_HOME": str(home), "KCONTRACT_CACHE": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"^note: {re.escape(str(tmp_path / '.kcontract-cache'))} is not writable \(.*\): caching in "
                     rf"{re.escape(str(home))}/kcontract/[0-9a-f]{{16}} instead$", proc.stderr, re.M), proc.stderr
    assert list((home / "kcontract").glob("*/references/*/*.bin"))
    assert "OSError" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("what", ["a cache that cannot be written anywhere", "no NVRTC at all", "a CuPy that cannot load",
                                  "no GPU for a GPU contract"])
def test_an_environment_that_cannot_work_ends_in_seconds_with_one_line_and_3(tmp_path, what):
    env, args, expected = {}, ["run"], ""
    if what == "a cache that cannot be written anywhere":
        contract = _copy_contract(tmp_path)
        (tmp_path / ".kcontract-cache").write_text("not a folder")
        (tmp_path / "xdg").write_text("not a folder either")
        env, args = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "KCONTRACT_CACHE": ""}, ["run", "--contract",
                                                                                     str(contract)]
        expected = "ERROR: no cache folder can be written: "
    elif what == "no NVRTC at all":
        harness = tmp_path / "sitecustomize.py"  # hides every NVRTC this machine has
        harness.write_text("import kcontract.toolchain.locate as l\nl.nvrtc_candidates = lambda: []\n")
        env, expected = {"PYTHONPATH": str(tmp_path)}, "ERROR: no NVRTC found: install a toolchain: "
    elif what == "a CuPy that cannot load":
        (tmp_path / "cupy").mkdir()
        (tmp_path / "cupy" / "__init__.py").write_text(
            "raise ImportError('libcudart.so.13: cannot open shared object file: No such file or directory')\n")
        env, expected = {"PYTHONPATH": str(tmp_path)}, "ERROR: decode_"
    elif _gpu():
        pytest.skip("a GPU is present")
    else:
        expected = "ERROR: decode_"
    started = time.monotonic()
    proc = _kcontract_with_path(*args, env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert time.monotonic() - started < 10
    assert proc.stderr.startswith(expected) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""
    if what == "a CuPy that cannot load":
        assert "CuPy does not import (libcudart.so.13: cannot open shared object file" in proc.stderr


def _kcontract_with_path(*args: str, env: dict) -> subprocess.CompletedProcess:
    """The console script with a PYTHONPATH of the test's own (a harness), at 80 columns, no terminal."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KCONTRACT_IN_PROCESS")}
    environ |= {"COLUMNS": "80"} | env
    environ = {k: v for k, v in environ.items() if v != ""}
    return subprocess.run([str(SCRIPT), *args], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


def test_piped_list_and_records_keep_every_cell_whole():
    listed = kcontract("list")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("\t") for line in listed.stdout.splitlines() if "\t" in line]
    assert rows[0] == ["entry", "family", "kernel", "cases", "gates"]
    assert ["prompt_fused_d256_g2_sliding_bf16", "attention.prompt", "kernels/window_prompt_fused.cu", "ring_w1024, across_a_chunk",
            "1 2 3 4 5"] in rows
    records = kcontract("records", "--contract", "tests/contracts/gate5/contract.yaml")
    assert records.returncode == 0, records.stdout + records.stderr
    lines = [line.split("\t") for line in records.stdout.splitlines() if line.startswith("tiny/")]
    assert len(lines) == 14 and all(len(cells) == 11 for cells in lines), records.stdout
    assert "…" not in listed.stdout + records.stdout


def test_help_imports_no_command_and_answers_fast():
    code = ("import sys, time; t = time.perf_counter(); sys.argv = ['kcontract', '--help']\n"
            "from kcontract.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pydantic', 'rich', 'yaml', 'cupy'))\n"
            "print('HEAVY', heavy, 'SECONDS', time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    heavy, seconds = re.search(r"HEAVY (\[.*\]) SECONDS ([\d.]+)", done.stdout).groups()
    assert heavy == "[]" and float(seconds) < 0.3, done.stdout
    proc = kcontract("--help")
    assert proc.returncode == 0 and "cache" in proc.stdout


STATEFUL = '''"""A decode kernel whose module keeps state: a token made at import, written out at every call."""
import os
import uuid

from tests.doubles.decode import window_decode

TOKEN = uuid.uuid4().hex


def decode(**buffers):
    with open(os.environ["KCONTRACT_TEST_TOKENS"], "a") as log:
        log.write(f"{os.getpid()} {TOKEN}\\n")
    return window_decode(**buffers)
'''


def test_each_task_imports_its_python_kernels_afresh_in_a_reused_worker(tmp_path):
    contract = write_contract(tmp_path, (ENTRY % "stateful:decode") + (ENTRY % "stateful:decode").split(
        "entries:\n", 1)[1].replace("name: dec", "name: dec2"))
    (tmp_path / "stateful.py").write_text(STATEFUL)
    tokens = tmp_path / "tokens.txt"
    proc = kcontract("run", "--contract", str(contract), "--jobs", "1", cwd=tmp_path,
                     env={"KCONTRACT_TEST_TOKENS": str(tokens)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [line.split() for line in tokens.read_text().splitlines()]
    assert len({pid for pid, _ in calls}) == 1  # one worker ran every task
    assert len({token for _, token in calls}) == 8  # 2 entries x 4 gates, each with a fresh import
