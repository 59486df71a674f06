"""Receipts judged row by row: a change stales exactly the rows that depend on it, a comment stays current by
machine code, a changed checker is reported and fails only when strict, and `receipt upgrade` turns the earlier
whole-contract form into rows."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.receipts.currency import check_receipts
from kcontract.receipts.judge import judge_rows
from kcontract.receipts.receipt import Receipt
from tests.helpers.receipts import commit_all, git, gpu_receipt, outcome, passing_document, write_receipt

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "cuda" / "tiny.cu"
CONTRACT = """version: 1
seed: 9
targets: [sm_80, sm_90]
require_receipt: true
entries:
  - name: tiny
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/tiny.cu, symbols: {scale: "tiny_scale<32>", round: tiny_round}}}
    launch: {scale: {threads: 128, dynamic_smem: 4096}, round: {threads: 256}}
  - name: other
    family: tests.families.tiny:TinyFamily
    description: the same kernel from another source
    kernel: {cuda: {source: kernels/other.cu, symbols: {scale: "tiny_scale<32>", round: tiny_round}}}
    launch: {scale: {threads: 128, dynamic_smem: 4096}, round: {threads: 256}}
controls:
  - name: tiny_doubled
    entry: tiny
    gate: 5
    patch: controls/tiny_doubled.patch
    fault: the tile holds twice the scaled value
"""


@pytest.fixture(autouse=True)
def shared_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path_factory.getbasetemp() / "kcontract-cache"))
    for name in ("KCONTRACT_GIT_COMMIT", "KCONTRACT_GIT_DIRTY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """Two CUDA entries on two sources and a control patching one, committed with a receipt of them all; the
    working directory is the project's."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "controls").mkdir()
    shutil.copy(TINY, tmp_path / "kernels" / "tiny.cu")
    shutil.copy(TINY, tmp_path / "kernels" / "other.cu")
    text = TINY.read_text()
    patch = difflib.unified_diff(text.splitlines(keepends=True),
                                 text.replace("v * a;", "v * a * 2.0f;").splitlines(keepends=True),
                                 "a/kernels/tiny.cu", "b/kernels/tiny.cu")
    (tmp_path / "controls" / "tiny_doubled.patch").write_text("".join(patch))
    contract = tmp_path / "contract.yaml"
    contract.write_text(CONTRACT)
    commit_all(tmp_path)
    write_receipt(contract, scored(gpu_receipt(contract), tmp_path))
    commit_all(tmp_path, "the receipt")
    monkeypatch.chdir(tmp_path)
    return contract


def scored(receipt: dict, base: Path) -> dict:
    """The receipt with a full mutation score of each kernel source as it is, as a complete receipt has."""
    from kcontract.identity import file_sha256

    receipt["mutation"] = {name: {"entry": name, "score_pct": 100.0, "mutants": 30,
                                  "source_sha256": file_sha256(base / "kernels" / f"{name}.cu")}
                           for name in ("tiny", "other")}
    return receipt


def states(contract: Path, machine: bool = False) -> dict[str, str]:
    """Each row's state, by `name` or `control name`."""
    from kcontract.receipts.machine_code import MachineCode

    loaded = load_contract(str(contract), import_kernels=False)
    receipt = Receipt.read(contract.parent / "receipts" / "contract-h200.json")
    with MachineCode(loaded) as code:
        judged = judge_rows(loaded, receipt, code if machine else None)
    return {j.shown: j.state for j in judged}


def receipt_check(*args: str):
    return CliRunner().invoke(cli, ["receipt", "check", *args])


def test_a_fresh_receipt_is_current_row_by_row(project):
    assert states(project) == {"tiny": "current", "other": "current", "control tiny_doubled": "current"}
    done = receipt_check()
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == ["receipts: 1 receipt: 3 of 3 rows current"]


def test_editing_one_cuda_source_stales_exactly_its_entries_and_their_controls(project):
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text().replace("__float2bfloat16_rn(x[i])", "__float2bfloat16_rz(x[i])"))
    assert states(project, machine=True) == {"tiny": "stale", "other": "current", "control tiny_doubled": "stale"}
    done = receipt_check()
    assert done.exit_code == 1
    lines = done.output.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("FAIL receipts/contract-h200.json: 2 rows stale (tiny, control tiny_doubled): "
                               "kernels/tiny.cu changed (sha256 ")
    assert "; its machine code changed on sm_80 (tiny_round): run `kcontract run --contract contract.yaml " \
           "--stale --receipt receipts/contract-h200.json` on a GPU and commit it" in lines[0]
    assert lines[1].startswith("note: receipts/contract-h200.json: 1 compiled entry has no mutation score of its "
                               "kernel source as it is (tiny)")  # its score measured the source before the edit
    assert lines[2] == "receipts: 1 receipt: 1 of 3 rows current, 2 stale"


def test_editing_one_entrys_yaml_stales_only_that_entry(project):
    project.write_text(project.read_text().replace("{scale: {threads: 128, dynamic_smem: 4096}, round: {threads: 256}}"
                                                   "\ncontrols", "{scale: {threads: 64, dynamic_smem: 4096}, round: "
                                                   "{threads: 256}}\ncontrols"))
    assert states(project) == {"tiny": "current", "other": "stale", "control tiny_doubled": "current"}
    done = receipt_check()
    assert "FAIL receipts/contract-h200.json: 1 row stale (other): its node at contract.yaml:10 changed" in done.output


def test_an_entrys_edit_stales_the_controls_planted_on_it_and_prose_stales_nothing(project):
    project.write_text(project.read_text().replace("the same kernel from another source", "prose only")
                       .replace("threads: 128, dynamic_smem: 4096}, round: {threads: 256}}\n  - name: other",
                                "threads: 128, dynamic_smem: 2048}, round: {threads: 256}}\n  - name: other"))
    assert states(project) == {"tiny": "stale", "other": "current", "control tiny_doubled": "stale"}
    done = receipt_check()
    assert "1 row stale (control tiny_doubled): its entry tiny's node at contract.yaml:6 changed" in done.output


def test_a_comment_only_edit_stays_current_by_machine_code(project):
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text("// a comment that changes no machine code\n" + source.read_text())
    assert states(project, machine=True) == {"tiny": "current", "other": "current", "control tiny_doubled": "current"}
    done = receipt_check()
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0].startswith("note: receipts/contract-h200.json: 2 rows current by machine code (tiny, control "
                               "tiny_doubled): kernels/tiny.cu changed, SASS unchanged on 2 SMs since ")
    assert lines[-1] == "receipts: 1 receipt: 3 of 3 rows current (2 by machine code)"


def test_a_recheck_compares_no_machine_code_of_rows_it_runs_again_anyway(project, monkeypatch):
    from kcontract.receipts.machine_code import MachineCode

    source = project.parent / "kernels" / "tiny.cu"
    source.write_text("// a comment that changes no machine code\n" + source.read_text())
    monkeypatch.setattr("kcontract.receipts.depends.core_digest", lambda: "0" * 64)
    loaded = load_contract(str(project), import_kernels=False)
    receipt = Receipt.read(project.parent / "receipts" / "contract-h200.json")
    compared = []
    with MachineCode(loaded) as code:
        real = code.compare
        code.compare = lambda *a: compared.append(a) or real(*a)
        plain = {j.shown: j.state for j in judge_rows(loaded, receipt, code)}
        assert len(compared) == 2 and plain["tiny"] == "current"  # current by machine code, judged earlier
        rechecked = {j.shown: j.state for j in judge_rows(loaded, receipt, code, recheck=True)}
    assert len(compared) == 2 and rechecked == {"tiny": "stale", "other": "current", "control tiny_doubled": "stale"}


def test_the_comparisons_compile_in_one_batch_now_and_one_at_the_rows_commit(project, monkeypatch):
    import kcontract.builds.cuda as cuda_builder

    (project.parent / "kernels" / "other.cu").write_text("// a comment\n" + (project.parent / "kernels" /
                                                                               "other.cu").read_text())
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text("// a comment that changes no machine code\n" + source.read_text())
    batches = []
    real = cuda_builder.build
    monkeypatch.setattr(cuda_builder, "build", lambda units, sms, *a, **k: batches.append(
        sorted(u.shown for u in units)) or real(units, sms, *a, **k))
    monkeypatch.setenv("KCONTRACT_CACHE", str(project.parent / "own-cache"))  # nothing compiled yet
    assert states(project, machine=True) == {"tiny": "current", "other": "current", "control tiny_doubled": "current"}
    assert len(batches) == 2 and all(len(units) == 3 for units in batches), batches  # 3 units, each revision once


def test_a_comment_on_an_uncommitted_run_cannot_be_judged_by_machine_code(project):
    receipt = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())
    for row in receipt["entries"] + receipt["controls"]:
        row["ran"]["dirty"] = True
    write_receipt(project, receipt)
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text("// a comment\n" + source.read_text())
    done = receipt_check()
    assert done.exit_code == 1
    assert "machine code not compared: the row ran on a tree that was no clean commit" in done.output


def test_a_core_change_is_reported_and_fails_only_when_strict(project, monkeypatch):
    monkeypatch.setattr("kcontract.receipts.depends.core_digest", lambda: "0" * 64)
    done = receipt_check()
    assert done.exit_code == 0, done.output
    note = ("note: receipts/contract-h200.json: 3 rows of 3 judged by an earlier kcontract (core {old}, now "
            "000000000000): refresh them with `kcontract run --contract contract.yaml --stale --recheck --receipt "
            "receipts/contract-h200.json` on a GPU and commit it")
    old = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())["entries"][0]["checker"]["core"]
    assert done.output.splitlines() == [note.format(old=old[:12]),
                                        "receipts: 1 receipt: 3 of 3 rows current; 3 judged by an earlier kcontract"]
    strict = receipt_check("--strict")
    assert strict.exit_code == 1
    assert strict.output.splitlines()[0] == "FAIL " + note.format(old=old[:12])[len("note: "):]
    project.write_text(project.read_text().replace("require_receipt: true", "require_receipt: strict"))
    assert receipt_check().exit_code == 1


def test_a_family_change_is_the_rows_of_that_family(project, monkeypatch):
    monkeypatch.setattr("kcontract.receipts.depends.family_digest", lambda cls: "f" * 64)
    report = check_receipts(load_contract(str(project), import_kernels=False))
    assert report.passed and report.rows["earlier checker"] == 3
    assert "(family tests.tiny " in report.notes[0] and ", now ffffffffffff)" in report.notes[0]


def test_missing_orphaned_and_failed_rows_fail_by_name(project):
    loaded = load_contract(str(project), import_kernels=False)
    document = passing_document(loaded)
    document["controls"][0] = outcome("control", "tiny_doubled", "tiny", [5])  # not red: a missed control
    receipt = gpu_receipt(project, document)
    receipt["entries"] = [r for r in receipt["entries"] if r["task"]["name"] != "other"]
    ghost = json.loads(json.dumps(receipt["entries"][0]))
    ghost["task"]["name"] = "gone"
    receipt["entries"].append(ghost)
    write_receipt(project, receipt)
    done = receipt_check()
    assert done.exit_code == 1
    text = done.output
    assert "FAIL receipts/contract-h200.json: 1 row missing (other): no row yet: run `kcontract run" in text
    assert ("FAIL receipts/contract-h200.json: 1 row failed (control tiny_doubled): its outcome failed (not red at "
            "its planted gate 5): fix it, then run") in text
    assert ("FAIL receipts/contract-h200.json: 1 row orphaned (gone): the contract has no such entry or control (a "
            "refresh drops the row): run") in text
    assert text.splitlines()[-1] == "receipts: 1 receipt: 1 of 3 rows current, 1 missing, 1 orphaned, 1 failed"


def test_a_known_finding_is_no_failed_row(project):
    project.write_text(project.read_text() + "known_findings:\n  - {entry: other, gate: 5, reason: accepted}\n")
    loaded = load_contract(str(project), import_kernels=False)
    document = passing_document(loaded)
    document["entries"][1] = outcome("entry", "other", "other", [5], {5})
    receipt = gpu_receipt(project, document)
    assert receipt["summary"].endswith("1 known findings; 1 controls: 1 red as planted, 0 missed; 0 limit problems")
    write_receipt(project, receipt)
    assert states(project)["other"] == "current"


@pytest.mark.parametrize("change, why", [
    (lambda r: r.update(kind="other"), "not a kcontract receipt"),
    (lambda r: r.pop("format"), "a receipt of the earlier whole-contract form: turn it into rows with `kcontract "
                                "receipt upgrade receipts/contract-h200.json`"),
    (lambda r: r["covers"].update(shard="1/2"), "invalid: shard 1/2 of contract.yaml, not the whole contract"),
    (lambda r: r.update(device="cpu"), "invalid: ran on cpu, and contract.yaml has kernels that run on a GPU"),
])
def test_invalid_receipts_fail(project, change, why):
    receipt = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())
    change(receipt)
    write_receipt(project, receipt)
    done = receipt_check()
    assert done.exit_code == 1 and why in done.output, done.output


def test_a_required_receipt_must_exist_and_a_malformed_one_fails(project):
    (project.parent / "receipts" / "contract-h200.json").unlink()
    done = receipt_check()
    assert done.exit_code == 1
    assert ("FAIL contract.yaml requires a receipt and none with rows covers it: run `kcontract run --contract "
            "contract.yaml --receipt receipts/contract-GPU.json` on a GPU and commit it") in done.output
    (project.parent / "receipts" / "bad.json").write_text('{"entries": 3')
    done = receipt_check()
    assert done.exit_code == 1 and "FAIL receipts/bad.json: not valid JSON" in done.output


def test_receipt_check_reads_receipts_beside_its_contract(project, tmp_path_factory, monkeypatch):
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    done = receipt_check("--contract", str(project))
    assert done.exit_code == 0 and "3 of 3 rows current" in done.output
    assert receipt_check().exit_code == 2


def legacy_of(contract: Path, commit: str) -> dict:
    """A receipt of the earlier whole-contract form of the project, as the last kcontract wrote it."""
    from kcontract.identity import file_sha256

    base = contract.parent
    rows = gpu_receipt(contract)
    sources = {p: file_sha256(base / p) for p in ("contract.yaml", "kernels/tiny.cu", "kernels/other.cu",
                                                  "controls/tiny_doubled.patch")}
    strip = ("depends", "checker", "ran")
    return {"kind": "kcontract-run", "contract": "contract.yaml", "created": "2026-12-01T00:00:00+00:00", "seed": 9,
            "device": "gpu", "wall_s": 3.0, "git": {"commit": commit, "dirty": False},
            "environment": {"gpu": "NVIDIA H200"}, "covers": {"entries": 2, "controls": 1, "partial": False},
            "checker": {"version": "0.1.0", "sha256": "c" * 64, "families": {"tests.tiny": "d" * 64}},
            "sources": sources, "summary": rows["summary"], "exit_code": 0, "counts": rows["counts"],
            "entries": [{k: v for k, v in r.items() if k not in strip} for r in rows["entries"]],
            "controls": [{k: v for k, v in r.items() if k not in strip} for r in rows["controls"]],
            "mutation": {"tiny": {"entry": "tiny", "score_pct": 96.0, "mutants": 10}}}


def test_upgrade_turns_an_earlier_receipt_into_current_rows_judged_by_an_earlier_checker(project):
    commit = git(project.parent, "rev-parse", "HEAD")
    path = write_receipt(project, legacy_of(project, commit))
    done = CliRunner().invoke(cli, ["receipt", "upgrade"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("upgraded receipts/contract-h200.json: 3 rows")
    upgraded = json.loads(path.read_text())
    assert upgraded["format"] == 2 and upgraded["runs"][0]["git"]["commit"] == commit
    assert upgraded["mutation"]["tiny"]["source_sha256"] == legacy_of(project, commit)["sources"]["kernels/tiny.cu"]
    report = check_receipts(load_contract(str(project), import_kernels=False))
    assert report.passed and report.rows["current"] == 3 and report.rows["earlier checker"] == 3
    again = CliRunner().invoke(cli, ["receipt", "upgrade", "receipts/contract-h200.json"])
    assert again.exit_code == 2 and "already has rows: nothing to upgrade" in again.output


def test_upgrade_reads_the_contract_at_the_receipts_commit_and_stales_only_what_changed_since(project):
    commit = git(project.parent, "rev-parse", "HEAD")
    write_receipt(project, legacy_of(project, commit))
    project.write_text(project.read_text().replace("round: {threads: 256}}\ncontrols", "round: {threads: 128}}\n"
                                                   "controls"))
    done = CliRunner().invoke(cli, ["receipt", "upgrade"])
    assert done.exit_code == 0, done.output
    assert states(project) == {"tiny": "current", "other": "stale", "control tiny_doubled": "current"}


def test_a_coverage_floor_is_judged_against_the_receipts_coverage_of_the_current_source(project):
    from kcontract.identity import file_sha256

    project.write_text(project.read_text().replace("    kernel: {cuda: {source: kernels/tiny.cu,",
                                                   "    coverage: {lines: 100}\n    kernel: {cuda: {source: kernels/tiny.cu,",
                                                   1))
    assert states(project)["tiny"] == "current"  # a floor is no part of a row's node
    done = receipt_check()
    assert done.exit_code == 1 and ("FAIL receipts/contract-h200.json: coverage of tiny not measured for its kernel "
                                    "source as it is: run `kcontract coverage tiny --contract contract.yaml "
                                    "--receipt receipts/contract-h200.json` on a GPU and commit it") in done.output
    receipt = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())
    sha = file_sha256(project.parent / "kernels" / "tiny.cu")
    receipt["coverage"] = {"tiny": {"source_sha256": sha, "lines": {"reachable": 10, "executed": 9, "argued": 0},
                                    "missed_lines": [13], "argued_lines": []}}
    write_receipt(project, receipt)
    done = receipt_check()
    assert done.exit_code == 1 and ("tiny executes 90.0 % of its reachable kernel lines, below its floor of 100 %: "
                                    "lines 13 run under no case") in done.output
    project.write_text(project.read_text().replace("coverage: {lines: 100}",
                                                   "coverage: {lines: 100, argued: [{line: 13, reason: a guard}]}"))
    assert receipt_check().exit_code == 0
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text() + "// touched\n")
    assert "coverage of tiny not measured for its kernel source as it is" in receipt_check().output


def test_a_branch_floor_is_judged_against_the_receipts_outcomes_with_the_arguments_as_they_are(project):
    from kcontract.identity import file_sha256

    project.write_text(project.read_text().replace("    kernel: {cuda: {source: kernels/tiny.cu,",
                                                   "    coverage: {lines: 100, branches: 100}\n"
                                                   "    kernel: {cuda: {source: kernels/tiny.cu,", 1))
    receipt = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())
    sha = file_sha256(project.parent / "kernels" / "tiny.cu")
    receipt["coverage"] = {"tiny": {"source_sha256": sha, "lines": {"reachable": 10, "executed": 10, "argued": 0},
                                    "missed_lines": [], "argued_lines": [],
                                    "branches": {"reachable": 4, "taken": 3, "argued": 0},
                                    "missed_branches": ["line 7: then"], "argued_branches": []}}
    write_receipt(project, receipt)
    done = receipt_check()
    assert done.exit_code == 1 and ("tiny takes 75.0 % of its reachable `if` outcomes, below its floor of 100 %: "
                                    "line 7: then taken by no case") in done.output, done.output
    project.write_text(project.read_text().replace(
        "coverage: {lines: 100, branches: 100}",
        "coverage: {lines: 100, branches: 100, argued: [{line: 7, branch: then, reason: a trap}]}"))
    assert receipt_check().exit_code == 0


def test_rooflines_drawn_from_other_bench_rows_fail_the_check(project):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib: pip install 'kcontract[plot]'")
    from kcontract.bench.plot import plot_rows
    from kcontract.receipts.plots import plots_beside

    path = project.parent / "receipts" / "contract-h200.json"
    data = json.loads(path.read_text())
    data["bench"] = [{"entry": "tiny", "call": "tiny 32", "bytes": 4096, "gbps": 100.0, "us": 1.0, "ratio": 0.1}]
    data["bench_ceiling"] = {"read_gbps": 4000.0}
    path.write_text(json.dumps(data))
    plot_rows(data["bench"], {"tiny": "tiny"}, data["bench_ceiling"], plots_beside(path))
    loaded = load_contract(str(project), import_kernels=False)
    assert not [p for p in check_receipts(loaded).problems if "rooflines" in p]
    data["bench"][0]["us"] = 2.0  # the bench measured again, the plots not drawn again
    path.write_text(json.dumps(data))
    assert [p for p in check_receipts(loaded).problems if "rooflines" in p] == [
        "receipts/contract-h200.json: 1 of its rooflines drawn from other bench rows (tiny.svg): run `kcontract bench "
        "--from-receipt receipts/contract-h200.json --plot receipts/contract-h200.plots` and commit them"]


def test_a_mutation_score_below_the_floor_fails_and_a_missing_one_is_named_in_a_note(project):
    from kcontract.identity import file_sha256

    receipt = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())
    receipt["mutation"] = {}
    write_receipt(project, receipt)
    first = receipt_check()
    assert first.exit_code == 0, first.output
    assert ("2 compiled entries have no mutation score of their kernel source as it is (tiny, other): run "
            "`kcontract mutate ENTRY --contract contract.yaml --receipt receipts/contract-h200.json` on a GPU for "
            "each and commit it") in first.output
    receipt = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())
    tiny, other = (file_sha256(project.parent / "kernels" / f"{n}.cu") for n in ("tiny", "other"))
    receipt["mutation"] = {"tiny": {"source_sha256": tiny, "score_pct": 94.9, "mutants": 30},
                           "other": {"source_sha256": other, "score_pct": 95.0, "mutants": 30}}
    write_receipt(project, receipt)
    done = receipt_check()
    assert done.exit_code == 1 and ("FAIL receipts/contract-h200.json: tiny's gates kill 94.9 % of its mutants, "
                                    "below the floor of 95 %") in done.output
    assert "other's gates" not in done.output and "no mutation score" not in done.output
    receipt["mutation"]["tiny"]["score_pct"] = 100.0
    write_receipt(project, receipt)
    assert receipt_check().exit_code == 0
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text() + "// touched\n")
    assert "1 compiled entry has no mutation score of its kernel source as it is (tiny)" in receipt_check().output


def _rows_ran_at(project: Path, commit: str, files: dict[str, str] | None = None) -> None:
    """Point every row of the project's receipt at `commit` (and, given `files`, at those file hashes); commit it."""
    receipt = json.loads((project.parent / "receipts" / "contract-h200.json").read_text())
    for row in receipt["entries"] + receipt["controls"]:
        row["ran"]["commit"] = commit
        for name, sha in (files or {}).items():
            if name in row["depends"]["files"]:
                row["depends"]["files"][name] = sha
    write_receipt(project, receipt)
    commit_all(project.parent, "the receipt, as a rebased branch left it")


def _commit_off_head(folder: Path, change=None) -> str:
    """A commit on a branch that is then deleted (as a rebase or squash merge leaves the one a row ran at)."""
    git(folder, "checkout", "-q", "-b", "gone")
    if change:
        change()
    commit = commit_all(folder, "a commit that leaves HEAD's history") if change else None
    if commit is None:
        git(folder, "commit", "-q", "--allow-empty", "-m", "a commit that leaves HEAD's history")
        commit = git(folder, "rev-parse", "HEAD").strip()
    git(folder, "checkout", "-q", "-")
    git(folder, "branch", "-q", "-D", "gone")
    return commit


def test_a_row_whose_commit_left_heads_history_is_judged_by_its_files_found_by_content(project):
    gone = _commit_off_head(project.parent)
    _rows_ran_at(project, gone)
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text("// a comment that changes no machine code\n" + source.read_text())
    assert states(project, machine=True) == {"tiny": "current", "other": "current", "control tiny_doubled": "current"}
    done = receipt_check()
    assert done.exit_code == 0, done.output
    assert f"SASS unchanged on 2 SMs since {gone[:12]}'s files, found by content (" in done.output


def test_a_row_whose_files_are_in_no_commit_of_head_is_stale_and_says_so(project):
    import hashlib

    source = project.parent / "kernels" / "tiny.cu"
    text = "// ran only off HEAD\n" + source.read_text()
    gone = _commit_off_head(project.parent, lambda: source.write_text(text))
    ran = hashlib.sha256(text.encode()).hexdigest()
    _rows_ran_at(project, gone, {"kernels/tiny.cu": ran})
    done = receipt_check()
    assert done.exit_code == 1
    assert (f"machine code not compared: commit {gone[:12]} is not in HEAD's history, and kernels/tiny.cu as it "
            f"ran (sha256 {ran[:12]}) is in none of HEAD's ") in done.output


def test_a_shallow_clone_that_lacks_a_rows_files_says_how_to_fetch_them(project, tmp_path):
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text("// a comment that changes no machine code\n" + source.read_text())
    commit_all(project.parent, "a comment")
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{project.parent}", str(clone))
    receipt = json.loads((clone / "receipts" / "contract-h200.json").read_text())
    gone = receipt["entries"][0]["ran"]["commit"]
    done = CliRunner().invoke(cli, ["receipt", "check", "--contract", str(clone / "contract.yaml")])
    assert done.exit_code == 1, done.output
    assert (f"machine code not compared: commit {gone[:12]} is not in HEAD's history, and kernels/tiny.cu as it ran "
            f"(sha256 ") in done.output
    assert "(this clone is shallow: fetch its history, as actions/checkout's `fetch-depth: 0` does)" in done.output


def test_a_kernel_added_to_a_source_leaves_the_rows_of_its_other_kernels_current(project):
    """The earlier source lacks the new kernel, so the row's kernel is built there alone, with only its names."""
    source = project.parent / "kernels" / "tiny.cu"
    source.write_text(source.read_text() + "\ntemplate <int N>\n__global__ void tiny_twice(float* x, float a, int n) {\n"
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] = 2.0f * a * x[i];\n}\n")
    project.write_text(project.read_text().replace("controls:\n", """  - name: twice
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/tiny.cu, symbols: {scale: "tiny_twice<32>", round: tiny_round}}}
    launch: {scale: {threads: 128, dynamic_smem: 4096}, round: {threads: 256}}
controls:
"""))
    found = states(project, machine=True)
    assert (found["tiny"], found["other"], found["control tiny_doubled"]) == ("current", "current", "current"), found
