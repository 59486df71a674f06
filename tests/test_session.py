"""The session owns a run: the contract loaded once, the options checked as a whole, tasks planned, the machine
checked and the cubins built once, the tasks run with listeners, the outputs written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcontract.errors import UsageError
from kcontract.session.plan import Selection
from kcontract.session.shard import parse_shard
from kcontract.session.options import RunOptions
from kcontract.session.session import Session

ROOT = Path(__file__).resolve().parents[1]
CPU = str(ROOT / "tests" / "contracts" / "rmsnorm.yaml")


@pytest.mark.parametrize("options, said", [
    (RunOptions(recheck=True), "--recheck re-runs rows judged by an earlier kcontract with --stale"),
    (RunOptions(stale=True), "--stale refreshes a receipt's rows: give the receipt"),
    (RunOptions(Selection(only=("x",)), stale=True, receipt="r.json"), "--stale picks the rows itself"),
    (RunOptions(Selection(gate=2), receipt="r.json"), "--receipt attests the whole contract"),
    (RunOptions(Selection(no_controls=True), shard=parse_shard("1/2")), "--shard 1/2 splits the whole contract"),
])
def test_options_that_cannot_go_together_are_refused_before_any_work(options, said):
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        Session(CPU).plan(options)


def test_a_session_plans_runs_and_writes_a_run_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_IN_PROCESS", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    session = Session(CPU)
    options = RunOptions(Selection(gate=2), jobs=1, json=str(tmp_path / "run.json"))
    plan = session.plan(options)
    assert plan.tasks and all(t.gates == [2] for t in plan.tasks) and not plan.notes
    said = session.prepare(plan, options)
    assert session.jobs == 1 and not any(line.startswith("--jobs auto") for line in said)
    steps, done = [], []
    result = session.run(plan, options, steps.append, done.append)
    assert len(done) == len(plan.tasks) and steps
    document = session.document(result)
    session.write(plan, result, document, options)
    written = json.loads((tmp_path / "run.json").read_text())
    assert written["summary"] == result.summary.line() and result.summary.exit_code == 0
