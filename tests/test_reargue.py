"""`kcontract receipt argue`: a receipt's mutation scores judged again under the contract's arguments, no GPU."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.mutate.reargue import reargue

ROOT = Path(__file__).resolve().parent.parent
RECEIPT = ROOT / "receipts" / "contract-h200.json"


@pytest.fixture(scope="module")
def loaded():
    return load_contract(str(ROOT / "contract.yaml"), import_kernels=False)


@pytest.fixture
def unargued():
    """The RMSNorm score as if its campaign had run before any argument: every argued mutant a survivor."""
    score = copy.deepcopy(json.loads(RECEIPT.read_text())["mutation"]["rmsnorm_h4096"])
    moved = score.pop("argued") + score["survivors"]
    score["survivors"] = [{k: m[k] for k in ("ident", "kind", "diff")} for m in moved]
    status = score["by_status"]
    status["survived"] = status.pop("argued", 0) + status.get("survived", 0)
    for counts in score["by_class"].values():
        if "argued" in counts:
            counts["survived"] = counts.pop("argued") + counts.get("survived", 0)
    score["score_pct"] = round(100.0 * status["killed"] / (status["killed"] + status["survived"]), 1)
    return score


def test_the_contracts_arguments_set_survivors_apart(loaded, unargued):
    assert unargued["score_pct"] < 95
    score, what = reargue(loaded, unargued)
    assert not what.skipped and what.after == score["score_pct"] == 100.0
    assert "survived" not in score["by_status"] and score["by_status"]["argued"] == len(score["argued"]) == 6
    assert {(a["line"], a["change"]) for a in score["argued"]} >= {(60, "< -> <="), (41, "== -> !=")}
    assert all(a["reason"] for a in score["argued"])
    assert sum(sum(c.values()) for c in score["by_class"].values()) == score["mutants"]


def test_a_changed_source_or_a_diff_the_seed_does_not_make_is_left_alone(loaded, unargued):
    changed = {**unargued, "source_sha256": "0" * 64}
    assert reargue(loaded, changed) == (changed, reargue(loaded, changed)[1])
    assert reargue(loaded, changed)[1].skipped == "its source changed since"
    forged = copy.deepcopy(unargued)
    forged["survivors"][0]["diff"] = "line 1: - x\n        + y"
    score, what = reargue(loaded, forged)
    assert score is forged and what.skipped == "its survivors are not the mutants its seed makes"


def test_the_command_rewrites_the_receipt_in_place(tmp_path, unargued):
    shutil.copytree(ROOT, tmp_path / "repo", ignore=shutil.ignore_patterns(".git", ".venv", ".kcontract-cache",
                                                                           "__pycache__", "*.egg-info"))
    receipt = tmp_path / "repo" / "receipts" / "contract-h200.json"
    data = json.loads(receipt.read_text())
    data["mutation"]["rmsnorm_h4096"] = unargued
    receipt.write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["receipt", "argue", "--contract", str(tmp_path / "repo" / "contract.yaml"),
                                      str(receipt)])
    assert result.exit_code == 0, result.output
    assert f"argue rmsnorm_h4096: {unargued['score_pct']} % -> 100.0 %" in result.output
    assert json.loads(receipt.read_text())["mutation"]["rmsnorm_h4096"]["score_pct"] == 100.0


def test_a_file_that_is_no_receipt_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    result = CliRunner().invoke(cli, ["receipt", "argue", "--contract", str(ROOT / "contract.yaml"), str(bad)])
    assert result.exit_code == 2 and "not a kcontract receipt" in result.output


def test_a_malformed_score_is_one_line_and_exit_2(tmp_path):
    receipt = tmp_path / "r.json"
    data = json.loads(RECEIPT.read_text())
    del data["mutation"]["rmsnorm_h4096"]["by_status"]
    receipt.write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["receipt", "argue", "--contract", str(ROOT / "contract.yaml"), str(receipt)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "the mutation score of rmsnorm_h4096 is malformed" in lines[0]
    assert json.loads(receipt.read_text()) == data  # nothing written
