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
from kcontract.session.run_result import work_units
from kcontract.session.session import Session
from kcontract.session.writers import writers
from tests.helpers.listeners import Heard

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
    heard = Heard()
    result = session.run(options, [heard, *writers(session, options)])
    tasks = result.plan.tasks
    assert tasks and all(t.gates == [2] for t in tasks) and not result.plan.notes
    assert session.jobs == 1 and not any(line.startswith("--jobs auto") for line in heard.notes)
    events = [e for e in heard.events if e != "note"]
    assert events[:2] == ["start", "step"] and events[-2:] == ["stop", "result"] and heard.result is result
    assert len(heard.done) == len(tasks) == result.finished and heard.units == work_units(session.loaded, tasks)
    written = json.loads((tmp_path / "run.json").read_text())
    assert written == result.document and written["summary"] == result.summary.line() == result.line
    assert result.exit_code == 0


def test_a_stale_run_with_every_row_current_runs_nothing_and_closes_with_the_receipts_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_IN_PROCESS", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    receipt = str(tmp_path / "receipt.json")
    session = Session(CPU)
    first = session.run(RunOptions(jobs=1, receipt=receipt), writers(session, RunOptions(jobs=1, receipt=receipt)))
    assert first.exit_code == 0 and Path(receipt).is_file()
    heard = Heard()
    stale = Session(CPU).run(RunOptions(jobs=1, receipt=receipt, stale=True), [heard])
    assert heard.events == ["note"] and heard.notes[0].startswith("--stale: re-running 0 of ")
    assert stale.line == f"{first.line} (re-ran 0 of {len(first.entries) + len(first.controls)} rows)"
    assert stale.exit_code == 0 and stale.summary is None


def test_the_machine_is_checked_through_the_session_once_for_every_command():
    """Every caller of the machine check goes through `Session.machine`: preflight's check_machine is called from
    the session module alone."""
    callers = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "kcontract").rglob("*.py")
                     if "check_machine(" in path.read_text() and path.name != "preflight.py")
    assert callers == ["kcontract/session/session.py"]
