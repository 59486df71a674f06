"""The pool starts the longest tasks first, by how long the receipt says they took on this kind of machine; the
parent compiles every SM only for units whose tasks check launch records, and with no GPU the first for the rest."""

from __future__ import annotations

import shutil
from pathlib import Path

from kcontract.contract.loader import load_contract
from kcontract.receipts.durations import gate_seconds
from kcontract.runner.order import start_order
from kcontract.builds.builds import Builds
from kcontract.session.prebuild import prebuild
from kcontract.verdict.outcome import Task
from kcontract.receipts.receipt import Receipt
from kcontract.receipts.schema import FORMAT, KIND

ROOT = Path(__file__).resolve().parents[1]


def task(kind: str, name: str, gate: int) -> Task:
    return Task(kind, name, "e", "contract.yaml", [gate], 1)


def test_known_tasks_start_longest_first_and_unknown_ones_before_them():
    tasks = [task("entry", "a", 1), task("entry", "a", 4), task("entry", "b", 1), task("control", "c", 2),
             task("control", "d", 1), task("entry", "new", 1)]
    durations = {("entry", "a", 1): 5.0, ("entry", "a", 4): 80.0, ("entry", "b", 1): 20.0,
                 ("control", "c", 2): 30.0, ("control", "d", 1): 90.0}
    order = [(tasks[i].name, tasks[i].gates[0]) for i in start_order(tasks, durations)]
    # a control that shares its entry's references still waits for the entries, however long it took
    assert order == [("new", 1), ("a", 4), ("c", 2), ("b", 1), ("a", 1), ("d", 1)]


def test_without_durations_entries_start_in_plan_order_then_controls():
    tasks = [task("control", "d", 1), task("entry", "a", 1), task("control", "c", 2), task("entry", "b", 4)]
    assert [tasks[i].name for i in start_order(tasks)] == ["a", "c", "b", "d"]


def test_durations_come_from_rows_that_ran_on_the_same_kind_of_machine():
    receipt = Receipt({"kind": KIND, "format": FORMAT, "controls": [], "entries": [
        {"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"}, "gates": {"1": {"seconds": 3.5},
                                                                                       "5": {"seconds": 0.2}}},
        {"task": {"kind": "entry", "name": "b"}, "ran": {"device": "cpu"}, "gates": {"1": {"seconds": 9.0}}},
        {"task": {"kind": "entry", "name": "c"}, "ran": {"device": "gpu"}, "gates": {"2": {"passed": True}}},
    ]})
    assert gate_seconds(receipt, "gpu") == {("entry", "a", 1): 3.5, ("entry", "a", 5): 0.2}
    assert gate_seconds(receipt, "cpu") == {("entry", "b", 1): 9.0}
    assert gate_seconds(Receipt({"kind": "something else"}), "gpu") == {} and gate_seconds(None, "cpu") == {}


def test_the_parent_compiles_every_sm_only_where_a_task_checks_records(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "tests" / "contracts" / "gate5", tmp_path / "gate5")
    shutil.copytree(ROOT / "tests" / "cuda", tmp_path / "cuda")
    shutil.copytree(ROOT / "tests" / "families", tmp_path / "tests" / "families")
    shutil.copy(ROOT / "tests" / "__init__.py", tmp_path / "tests")
    path = tmp_path / "gate5" / "contract.yaml"
    path.write_text(path.read_text().replace("../../cuda", "../cuda"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))  # its own cache: the counts below start cold
    loaded = load_contract(str(path))
    records = Task("entry", "tiny", "tiny", str(path), [5], 5)
    planted = Task("control", "stale_record", "tiny", str(path), [1], 5)
    line = prebuild(loaded, Builds.of(loaded), [records, planted], "sm_90")
    targets = len(loaded.targets)
    assert line.startswith(f"compile: {targets + 1} cubins (2 sources on up to {targets} SMs), 0 cached"), line
    again = prebuild(loaded, Builds.of(loaded), [planted], "sm_90")  # another session: the cache holds it
    assert again.startswith("compile: 1 cubin (1 source on up to 1 SM), 1 cached")


def test_with_no_gpu_a_launching_control_is_compiled_for_the_first_sm_alone(tmp_path, monkeypatch):
    from tests.helpers.launching_controls import launching_project

    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    loaded = load_contract(str(launching_project(tmp_path)))
    tasks = [Task("entry", "rms", "rms", loaded.path, [1], 1), Task("control", "eps_after_sqrt", "rms", loaded.path,
                                                                     [1], 1)]
    line = prebuild(loaded, Builds.of(loaded), tasks, None)
    # the entry on sm_90a and on sm_80, whose module its exports are read from; the control on sm_90a alone
    assert line.startswith("compile: 3 cubins (2 sources on up to 2 SMs), 0 cached"), line
