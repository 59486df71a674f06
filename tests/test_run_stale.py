"""`kcontract run --stale`: only the rows that are not current run again, written into the receipt in place,
and the refreshed receipt's verdicts equal a whole run's."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kcontract.receipts.receipt import Receipt
from kcontract.report.receipt import receipt_markdown
from tests.helpers.cli import kcontract_in_process, no_traceback

CPU = "tests/contracts/cpu.yaml"
FIELDS = ("passed", "checked", "decided", "bit_equal", "within", "failures")


def verdicts(receipt: dict) -> dict:
    """Each row's status and per-gate counts, by kind and name."""
    return {(r["task"]["kind"], r["task"]["name"]): (r["status"], {g: tuple(x[f] for f in FIELDS)
                                                                  for g, x in r["gates"].items()})
            for r in receipt["entries"] + receipt["controls"]}


@pytest.fixture
def stale_receipt(cpu_contract_run, tmp_path) -> tuple[Path, dict]:
    """The whole run's receipt with one entry's node changed, a control's row gone, another control's row
    failed, and a row of an entry that is gone."""
    whole = json.loads(cpu_contract_run.receipt.read_text())
    receipt = copy.deepcopy(whole)
    entry = next(r for r in receipt["entries"] if r["task"]["name"] == "np_decode_d512_g16")
    entry["depends"]["node"] = "0" * 64
    receipt["controls"] = [r for r in receipt["controls"] if r["task"]["name"] != "np_truncated_output"]
    missed = next(r for r in receipt["controls"] if r["task"]["name"] == "np_order_dependent_merge")
    for result in missed["gates"].values():
        result["passed"] = True
    ghost = copy.deepcopy(receipt["entries"][0])
    ghost["task"]["name"] = "np_gone"
    receipt["entries"].append(ghost)
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    return path, whole


def test_run_stale_reruns_only_what_is_not_current_and_equals_a_whole_run(stale_receipt):
    path, whole = stale_receipt
    done = kcontract_in_process("run", "--contract", CPU, "--jobs", "2", "--stale", "--receipt", str(path))
    no_traceback(done)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    plan = next(line for line in done.stderr.splitlines() if line.startswith("--stale:"))
    assert plan == ("--stale: re-running 3 of 25 rows: stale: its node at cpu.yaml:23 changed: np_decode_d512_g16; "
                    "missing: control np_truncated_output; failed: not red at its planted gate 2: control "
                    "np_order_dependent_merge; dropping 1 orphaned rows")
    assert done.stdout.splitlines()[-1] == f"{whole['summary']} (re-ran 3 of 25 rows)"
    refreshed = json.loads(path.read_text())
    assert verdicts(refreshed) == verdicts(whole)
    assert [r["task"]["name"] for r in refreshed["entries"]] == [r["task"]["name"] for r in whole["entries"]]
    assert refreshed["summary"] == whole["summary"] and refreshed["exit_code"] == 0
    assert [(r["mode"], r["rows"], r["of"]) for r in refreshed["runs"]] == [("whole", 25, 25), ("stale", 3, 25)]
    spent = refreshed["runs"][1]["task_seconds"]  # each run keeps where its task seconds went
    assert set(spent) == {"inputs_s", "reference_s", "launch_s", "compare_s", "other_s"} and spent["launch_s"] > 0
    assert "references" in refreshed["runs"][1] and "task s: inputs " in receipt_markdown(Receipt(refreshed))
    stale_run = refreshed["runs"][1]["id"]
    rerun = {r["task"]["name"] for r in refreshed["entries"] + refreshed["controls"] if r["ran"]["run"] == stale_run}
    assert rerun == {"np_decode_d512_g16", "np_truncated_output", "np_order_dependent_merge"}
    again = kcontract_in_process("run", "--contract", CPU, "--stale", "--receipt", str(path))
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == f"{whole['summary']} (re-ran 0 of 25 rows)"
    assert "--stale: re-running 0 of 25 rows: every row is current" in again.stderr


@pytest.mark.parametrize("args, why", [
    (("--stale",), "--stale refreshes a receipt's rows: give the receipt with --receipt FILE"),
    (("--recheck", "--receipt", "r.json"), "--recheck re-runs rows judged by an earlier kcontract with --stale"),
    (("--stale", "--only", "np_*", "--receipt", "r.json"), "--stale picks the rows itself: drop --only"),
    (("--stale", "--shard", "1/2", "--receipt", "r.json"), "--stale picks the rows itself"),
])
def test_stale_options_that_cannot_go_together_are_one_line_and_exit_2(args, why, tmp_path):
    done = kcontract_in_process("run", "--contract", CPU, *args)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"ERROR: {why}"), done.stderr


def test_stale_refuses_an_earlier_receipt_and_a_file_that_is_no_receipt(tmp_path):
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"kind": "kcontract-run", "contract": "cpu.yaml", "entries": []}))
    done = kcontract_in_process("run", "--contract", CPU, "--stale", "--receipt", str(earlier))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"ERROR: --receipt {earlier}: a receipt of the earlier whole-contract form: "
                                   f"turn it into rows with `kcontract receipt upgrade {earlier}` first")
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    done = kcontract_in_process("run", "--contract", CPU, "--stale", "--receipt", str(other))
    assert done.returncode == 2 and "not a kcontract receipt" in done.stderr
