"""GitHub Actions output: annotations at contract lines, escaped, at most ten; the step summary; the workflow."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from kcontract.builds.builds import Builds
from kcontract.contract.loader import load_contract
from kcontract.contract.model import KnownFinding
from kcontract.gates.base import GateResult
from kcontract.report import github
from kcontract.report.github import annotation, emit, escape_data, escape_property
from kcontract.runner.execute import execute
from kcontract.runner.job import jobs_for
from kcontract.verdict.outcome import Outcome, Task
from kcontract.verdict.summary import summarise

ROOT = Path(__file__).resolve().parents[1]
CPU = "tests/contracts/cpu.yaml"
ENTRY, OTHER, CONTROL = "np_decode_d128_g4", "np_decode_d512_g16", "np_truncated_output"


@pytest.fixture(scope="module")
def run():
    """Real gate results on the CPU contract: the entry's kernel passing gate 1 on one case, the control red there.

    The failing entry is the red result filed under another entry; the missed control is the passing result filed
    under the control planted at that gate."""
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        loaded = load_contract(CPU)
        ok, red = (execute(job) for job in jobs_for(loaded, [
            Task("entry", ENTRY, ENTRY, CPU, [1], loaded.seed, "linear_3000", cache=False),
            Task("control", CONTROL, ENTRY, CPU, [1], loaded.seed, "linear_3000", cache=False)], Builds.of(loaded)))
    finally:
        os.chdir(old)
    assert ok.status == red.status == "ran" and ok.gates[1].passed and not red.gates[1].passed
    failing = dataclasses.replace(red, task=dataclasses.replace(red.task, kind="entry", name=OTHER, entry=OTHER))
    missed = dataclasses.replace(ok, task=dataclasses.replace(ok.task, kind="control", name=CONTROL))
    return loaded, ok, failing, missed, {c.name: c.gate for c in loaded.controls}


def emitted(loaded, path, entries, controls, planted, **environ):
    """What emit() printed, line by line."""
    lines: list[str] = []
    summary = summarise(entries, controls, loaded.known_findings, planted)
    emit(loaded, path, entries, controls, summary, planted, environ={"GITHUB_ACTIONS": "true", **environ},
         write=lines.append)
    return lines


def red_copies(outcome: Outcome, loaded, count: int) -> list[Outcome]:
    """`count` failing outcomes, under the contract's entries in turn and then under made-up names."""
    names = [e.name for e in loaded.entries] + [f"extra_{i}" for i in range(count)]
    return [dataclasses.replace(outcome, task=dataclasses.replace(outcome.task, name=n, entry=n))
            for n in names[:count]]


def test_a_failing_gate_and_a_missed_control_are_annotated_at_their_contract_lines(run, tmp_path):
    loaded, ok, failing, missed, planted = run
    lines = emitted(loaded, CPU, [ok, failing], [missed], planted, GITHUB_WORKSPACE=str(ROOT),
                    GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    assert len(lines) == 2 and all(line.startswith("::error file=tests/contracts/cpu.yaml,line=") for line in lines)
    gate_line = f"line={loaded.entry(OTHER).line},title=kcontract gate 1 exactness vs float64%3A {OTHER}::"
    assert gate_line in lines[0]
    message = lines[0].split("::", 2)[2]
    assert "%0A  worst: case linear_3000" in message and "%0A  replay: kcontract run --contract" in message
    assert failing.gates[1].message in message and "\n" not in lines[0]
    assert f"line={loaded.control(CONTROL).line},title=kcontract gate 1 exactness vs float64%3A control {CONTROL}" \
           f" missed::" in lines[1]
    assert "MISSED: gate 1 passed" in lines[1] and f"--control {CONTROL} --gate 1" in lines[1]


def test_crashed_and_timed_out_tasks_count_as_failures_in_contract_order(run):
    loaded, _, failing, _, planted = run
    crashed = Outcome(Task("entry", ENTRY, ENTRY, CPU, [1, 2], loaded.seed), status="crashed",
                      detail="worker died (signal SIGABRT)")
    late = Outcome(Task("control", CONTROL, ENTRY, CPU, [1], loaded.seed), status="timed out", detail="no answer")
    lines = emitted(loaded, CPU, [failing, crashed], [late], planted)
    assert [re.search(r"line=(\d+)", line).group(1) for line in lines] == \
           [str(loaded.entry(ENTRY).line), str(loaded.entry(OTHER).line), str(loaded.control(CONTROL).line)]
    assert "title=kcontract gates 1 and 2 crashed%3A np_decode_d128_g4::" in lines[0]
    assert "worker died (signal SIGABRT)" in lines[0] and f"--only {ENTRY} --seed" in lines[0]
    assert "title=kcontract gate 1 exactness vs float64 timed out%3A control" in lines[2]


@pytest.mark.parametrize("count", [1, 10])
def test_one_to_ten_failures_are_each_annotated_with_no_warning(run, count):
    loaded, _, failing, _, planted = run
    lines = emitted(loaded, CPU, red_copies(failing, loaded, count), [], planted)
    assert len(lines) == count and all(line.startswith("::error ") for line in lines)


def test_more_than_ten_failures_annotate_ten_and_count_the_rest(run):
    loaded, _, failing, _, planted = run
    lines = emitted(loaded, CPU, red_copies(failing, loaded, 12), [], planted)
    assert len(lines) == 11 and all(line.startswith("::error ") for line in lines[:10])
    assert lines[10].startswith("::warning::2 more failures not annotated: see the step summary")


def test_known_findings_are_not_annotated(run):
    loaded, _, failing, _, planted = run
    accepted = dataclasses.replace(loaded, known_findings=[KnownFinding(entry=OTHER, gate=1, reason="accepted")])
    assert emitted(accepted, CPU, [failing], [], planted) == []


def test_messages_and_properties_are_escaped_as_workflow_commands_are():
    assert escape_data("50% of a,b: c\r\nd") == "50%25 of a,b: c%0D%0Ad"
    assert escape_property("50% of a,b: c\r\nd") == "50%25 of a%2Cb%3A c%0D%0Ad"
    line = annotation("error", "a: 1%, b\nnext", file="dir,x/c:d.yaml", line=3, title="t: a,b%\n")
    assert line == "::error file=dir%2Cx/c%3Ad.yaml,line=3,title=t%3A a%2Cb%25%0A::a: 1%25, b%0Anext"
    assert annotation("warning", "plain") == "::warning::plain"


def test_a_gate_message_with_commas_colons_percent_and_newlines_stays_one_line(run):
    loaded, _, failing, _, planted = run
    result = GateResult(gate=1, passed=False, failures=1, message="100% off, at: row 3\nsecond line",
                        replay="kcontract run --only x")
    odd = dataclasses.replace(failing, gates={1: result})
    [line] = emitted(loaded, CPU, [odd], [], planted)
    assert "100%25 off, at: row 3%0Asecond line%0A  replay" in line and "\n" not in line


def test_a_contract_in_another_folder_is_named_relative_to_the_workspace(run, tmp_path, monkeypatch):
    _, _, failing, _, planted = run
    folder = tmp_path / "project" / "ci, nightly"
    folder.mkdir(parents=True)
    text = (ROOT / "tests" / "contracts" / "faulty.yaml").read_text()
    (folder / "contract.yaml").write_text("# moved\n# down three lines\n\n" + text)
    monkeypatch.chdir(tmp_path)
    moved = load_contract("project/ci, nightly/contract.yaml", import_kernels=False)
    assert moved.entry("after").line == 3 + load_contract(str(ROOT / "tests/contracts/faulty.yaml"),
                                                          import_kernels=False).entry("after").line
    red = dataclasses.replace(failing, task=dataclasses.replace(failing.task, name="after", entry="after"))
    path = "project/ci, nightly/contract.yaml"
    [line] = emitted(moved, path, [red], [], planted, GITHUB_WORKSPACE=str(tmp_path / "project"))
    assert line.startswith(f"::error file=ci%2C nightly/contract.yaml,line={moved.entry('after').line},")
    [line] = emitted(moved, path, [red], [], planted)
    assert line.startswith(f"::error file=project/ci%2C nightly/contract.yaml,line={moved.entry('after').line},")


def test_a_cuda_entry_names_its_kernel_source_relative_to_the_workspace(run, tmp_path, monkeypatch):
    _, _, failing, _, planted = run
    repo = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    entry = next(e for e in repo.entries if e.kernel.cuda is not None)
    monkeypatch.chdir(tmp_path)
    red = dataclasses.replace(failing, task=dataclasses.replace(failing.task, name=entry.name, entry=entry.name))
    [line] = emitted(repo, str(ROOT / "contract.yaml"), [red], [], planted, GITHUB_WORKSPACE=str(ROOT))
    assert line.startswith(f"::error file=contract.yaml,line={entry.line},")
    assert f"%0A  kernel: {entry.kernel.cuda.source}" in line


def test_the_step_summary_holds_the_summary_line_and_a_row_per_entry(run, tmp_path):
    loaded, ok, failing, missed, planted = run
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    entries = [ok, failing]
    emitted(loaded, CPU, entries, [missed], planted, GITHUB_STEP_SUMMARY=str(target))
    text = target.read_text()
    summary = summarise(entries, [missed], loaded.known_findings, planted)
    assert text.startswith("earlier step\n") and f"```\n{summary.line()}\n```" in text
    assert "| entry | family | gate 1 | seconds |" in text
    assert re.search(rf"^\| {ENTRY} \| attention\.decode \| pass \| [\d.]+ \|$", text, re.MULTILINE)
    assert re.search(rf"^\| {OTHER} \| attention\.decode \| FAIL \| [\d.]+ \|$", text, re.MULTILINE)
    assert "| control | entry | planted at | verdict |" in text
    assert f"| {CONTROL} | {ENTRY} | gate 1 exactness vs float64 | MISSED (gate 1 passed) |" in text
    assert "### 2 failures" in text and failing.gates[1].replay in text


def test_the_step_summary_stays_under_its_limit_and_says_what_it_left_out(run, tmp_path, monkeypatch):
    loaded, _, failing, _, planted = run
    monkeypatch.setattr(github, "SUMMARY_BYTES", 6000)
    target = tmp_path / "summary.md"
    emitted(loaded, CPU, red_copies(failing, loaded, 40), [], planted, GITHUB_STEP_SUMMARY=str(target))
    text = target.read_text()
    assert len(text.encode()) <= 6000
    assert "SUMMARY 40 kernels" in text and "### 40 failures" in text
    left = re.search(r"^(\d+) failures left out of the step summary", text, re.MULTILINE)
    assert left and 0 < int(left.group(1)) < 40
    assert len(re.findall(r"^- \*\*kcontract gate 1", text, re.MULTILINE)) == 40 - int(left.group(1))


def test_a_full_step_summary_gets_nothing_more_and_one_note(run, tmp_path, monkeypatch, capsys):
    loaded, _, failing, _, planted = run
    monkeypatch.setattr(github, "SUMMARY_BYTES", 1000)
    target = tmp_path / "summary.md"
    target.write_text("x" * 900)
    assert len(emitted(loaded, CPU, [failing], [], planted, GITHUB_STEP_SUMMARY=str(target))) == 1
    assert target.read_text() == "x" * 900
    assert capsys.readouterr().err.startswith("note: the GitHub step summary")


def test_an_unwritable_step_summary_is_one_note_and_the_run_goes_on(run, tmp_path, capsys):
    loaded, _, failing, _, planted = run
    lines = emitted(loaded, CPU, [failing], [], planted, GITHUB_STEP_SUMMARY=str(tmp_path / "missing" / "s.md"))
    assert len(lines) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("note: cannot write the GitHub step summary")


def test_nothing_is_printed_or_written_outside_github_actions(run, tmp_path, capsys):
    loaded, _, failing, missed, planted = run
    summary = summarise([failing], [missed], loaded.known_findings, planted)
    for environ in ({}, {"GITHUB_ACTIONS": "false"}, {"CI": "true"}):
        lines: list[str] = []
        emit(loaded, CPU, [failing], [missed], summary, planted,
             environ={**environ, "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}, write=lines.append)
        assert lines == []
    assert not (tmp_path / "s.md").exists() and capsys.readouterr() == ("", "")


def test_kcontract_run_annotates_on_github(tmp_path):
    """The whole path: `kcontract run` on a contract whose kernel aborts, as a GitHub runner would run it."""
    target = tmp_path / "summary.md"
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(target), "GITHUB_WORKSPACE": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "kcontract", "run", "--contract", "tests/contracts/faulty.yaml",
                           "--jobs", "2", "--only", "before", "--only", "aborts", "--gate", "1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    if "::error" not in done.stdout:
        pytest.skip("emit() not wired into kcontract run yet")
    loaded = load_contract(str(ROOT / "tests/contracts/faulty.yaml"), import_kernels=False)
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith(f"::error file=tests/contracts/faulty.yaml,line={loaded.entry('aborts').line},")
    assert "crashed" in errors[0]
    text = target.read_text()
    assert "SUMMARY 2 kernels: 1 pass gate 1, 1 fail" in text
    assert re.search(r"^\| before \| attention\.decode \| pass \|", text, re.MULTILINE)
    assert re.search(r"^\| aborts \| attention\.decode \| crashed \|", text, re.MULTILINE)


# The documented workflow: it parses, and each kcontract command names options that exist.

WORKFLOW = ROOT / "docs" / "ci-workflow.yml"
PENDING = {("run", "--shard"): "`kcontract run --shard` is not built yet",
           ("receipt", "merge"): "`kcontract receipt merge` is not built yet"}


def workflow_commands() -> list[list[str]]:
    """Every `kcontract ...` command in the workflow's run steps, as words (expressions as placeholders)."""
    data = yaml.safe_load(WORKFLOW.read_text())
    commands = []
    for job in data["jobs"].values():
        for step in job["steps"]:
            script = re.sub(r"\$\{\{[^}]*\}\}", "X", step.get("run", ""))
            for part in re.split(r"&&|\|\||;|\n", script):
                words = shlex.split(part)
                if words[:1] == ["kcontract"]:
                    commands.append(words[1:])
    return commands


def test_the_workflow_parses_with_its_four_jobs():
    data = yaml.safe_load(WORKFLOW.read_text())
    assert set(data["jobs"]) == {"cpu", "gpu", "receipt", "review"}
    assert data["jobs"]["cpu"]["runs-on"] == "ubuntu-latest"
    assert data["jobs"]["gpu"]["runs-on"][:2] == ["self-hosted", "gpu"]
    review = data["jobs"]["review"]
    assert review["runs-on"][:2] == ["self-hosted", "gpu"] and "pull_request" in review["if"]
    assert ["review", "--base", "origin/main", "--markdown", "reports/review.md", "--json", "reports/review.json"] \
        in workflow_commands()
    readme = (ROOT / "README.md").read_text().splitlines()
    install = next(line for line in readme if line.startswith("python3 -m pip install -e"))
    assert install in [s.get("run") for s in data["jobs"]["cpu"]["steps"]]
    uploads = [s for job in data["jobs"].values() for s in job["steps"] if s.get("uses", "").startswith(
        "actions/upload-artifact@v4")]
    assert any("receipts/contract-" in s["with"]["path"] for s in uploads)


def test_the_workflows_kcontract_commands_name_options_that_exist():
    from kcontract.cli import cli

    commands = workflow_commands()
    assert {tuple(c[:1]) for c in commands} >= {("check",), ("run",), ("receipt",), ("review",)}
    pending = set()
    for words in commands:
        command, path = cli, []
        while isinstance(command, click.Group) and words and not words[0].startswith("-"):
            name = words.pop(0)
            sub = command.get_command(click.Context(command), name)
            if sub is None:
                assert (path[-1] if path else "", name) in PENDING, f"kcontract {' '.join(path)} has no {name}"
                pending.add((path[-1], name))
                break
            command, path = sub, path + [name]
        else:
            known = {opt for p in command.params for opt in [*p.opts, *p.secondary_opts]}
            for word in words:
                option = word.split("=")[0]
                if option.startswith("-") and option not in known:
                    assert (path[-1], option) in PENDING, f"kcontract {' '.join(path)} has no option {option}"
                    pending.add((path[-1], option))
    if pending:
        pytest.skip("; ".join(PENDING[p] for p in sorted(pending)) + ": the rest of the workflow's options exist")
