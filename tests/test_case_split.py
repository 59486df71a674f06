"""A heavy range gate runs a task per case, side by side, and its row is what one task running its cases gives:
CPU entries split case by case read as the whole CPU run, count for count and output by output."""

from __future__ import annotations

import json
from pathlib import Path

from kcontract.contract.loader import load_contract
from kcontract.family.cases import family_cases
from kcontract.gates.base import GateResult, Offender
from kcontract.gates.range_verdict import joined, trimmed
from kcontract.session import plan as planning
from kcontract.session import session as session_module
from kcontract.session.plan import SPLIT_SECONDS, Selection, plan_tasks, split_by_case
from kcontract.runner.order import start_order
from tests.helpers.cli import kcontract_in_process

ROOT = Path(__file__).resolve().parents[1]
CPU = "tests/contracts/cpu.yaml"
SPLIT_ENTRIES = ("np_prompt_d128_g4", "np_decode_d512_g16")  # outputs that differ by case; partials of a decode
COUNTS = ("passed", "checked", "decided", "bit_equal", "within", "failures")


def test_only_an_entrys_long_range_gate_of_several_cases_is_split():
    loaded = load_contract(str(ROOT / CPU), import_kernels=False)
    tasks = plan_tasks(loaded, CPU, Selection())
    long = {(t.kind, t.name, t.gates[0]): SPLIT_SECONDS for t in tasks if len(t.gates) == 1}
    split = split_by_case(loaded, tasks, long)
    by_task = {}
    for task in split:
        by_task.setdefault((task.kind, task.name, tuple(task.gates)), []).append(task.case)
    for task in tasks:
        cases = by_task[(task.kind, task.name, tuple(task.gates))]
        many = family_cases(loaded.entry(task.entry).family, task.gates[0]) if len(task.gates) == 1 else []
        if task.kind == "entry" and task.gates[0] in (1, 3, 4) and len(many) > 1:
            assert cases == many, task
        else:
            assert cases == [None], task  # controls, gate 2 and gate 5, and single-case gates stay whole
    short = {key: SPLIT_SECONDS - 0.1 for key in long}
    assert split_by_case(loaded, tasks, short) == tasks and split_by_case(loaded, tasks, {}) == tasks


def test_joined_cases_add_their_counts_and_keep_the_first_failures_worst():
    worst = Offender("b", {"row": 3}, "1 (0x3f80)", "2 (0x4000) (decided)", "1 ulps outside; output out")
    a = GateResult(1, True, checked=10, decided=6, bit_equal=6, within=4, seconds=2.0,
                   facts={"by_output": {"out": {"checked": 10, "decided": 6, "bit_equal": 6, "within": 4,
                                                "failures": 0}},
                          "by_case": {"a": {"out": {"checked": 10, "decided": 6}}}, "keys": 5},
                   profile={"reference_s": 1.5, "live_gpu_mb": 30.0, "references": {"hit": 0, "miss": 1}})
    b = GateResult(1, False, checked=5, decided=5, bit_equal=4, within=0, failures=1, worst=worst, replay="r b",
                   causes=("a cause",), seconds=1.0,
                   facts={"by_output": {"out": {"checked": 5, "decided": 5, "bit_equal": 4, "within": 0,
                                                "failures": 1}},
                          "by_case": {"b": {"out": {"checked": 5, "decided": 5}}}, "keys": 9},
                   profile={"reference_s": 0.5, "live_gpu_mb": 50.0, "references": {"hit": 1, "miss": 0}})
    both = trimmed(joined(a, b))
    assert (both.passed, both.checked, both.decided, both.bit_equal, both.within, both.failures) == (
        False, 15, 11, 10, 4, 1)
    assert both.worst is worst and both.replay == "r b" and both.causes == ("a cause",)
    assert both.message == "1 of 15 outputs outside their range or not bit-equal where decided"
    assert both.facts["keys"] == 9 and both.facts["decided_pct"] == round(100 * 11 / 15, 2)
    assert "by_output" not in both.facts  # one output: as a whole run writes it
    assert set(both.facts["by_case"]) == {"a", "b"} and both.seconds == 3.0
    assert both.profile == {"reference_s": 2.0, "live_gpu_mb": 50.0, "references": {"hit": 1, "miss": 1}}


def _gates(report: Path) -> dict:
    doc = json.loads(report.read_text())
    return {(o["task"]["kind"], o["task"]["name"], g): {k: r[k] for k in COUNTS} | {
        "by_output": (r.get("facts") or {}).get("by_output"), "message": r.get("message")}
        for o in doc["entries"] + doc["controls"] for g, r in o["gates"].items()}


def test_entries_split_case_by_case_read_as_the_whole_run(tmp_path, monkeypatch, cpu_contract_run):
    monkeypatch.setattr(planning, "SPLIT_SECONDS", -1.0)  # every range gate of several cases runs apart
    planned = []

    def spied(loaded, tasks, *durations):
        planned.append((len(tasks), split_by_case(loaded, tasks, *durations)))
        return planned[-1][1]

    monkeypatch.setattr(session_module, "split_by_case", spied)
    split = kcontract_in_process("run", "--contract", CPU, "--jobs", "1", "--json", str(tmp_path / "split.json"),
                                 *(f"--only={name}" for name in SPLIT_ENTRIES), "--no-controls",
                                 env={"KCONTRACT_CACHE": str(tmp_path / "cache")})
    assert split.returncode == 0, split.stdout[-3000:] + split.stderr[-3000:]
    (before, after), = planned
    apart = [t for t in after if t.case is not None]
    assert apart and len(after) == before - len({(t.name, t.gates[0]) for t in apart}) + len(apart)
    whole = {key: gate for key, gate in _gates(cpu_contract_run.report).items() if key[1] in SPLIT_ENTRIES}
    assert whole and _gates(tmp_path / "split.json") == whole  # the console script's whole run's


def test_a_run_of_one_split_gate_says_no_case_in_its_summary(tmp_path, monkeypatch):
    env = {"KCONTRACT_CACHE": str(tmp_path / "cache")}
    args = ("run", "--contract", CPU, "--only", "np_prompt_d128_g4", "--gate", "4", "--no-controls", "--jobs", "1")
    whole = kcontract_in_process(*args, env=env)
    monkeypatch.setattr(planning, "SPLIT_SECONDS", -1.0)
    split = kcontract_in_process(*args, env=env)
    assert whole.returncode == split.returncode == 0, split.stdout[-3000:] + split.stderr[-3000:]
    assert split.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1] == (
        "SUMMARY 1 kernels: 1 pass gate 4, 0 fail, 0 known findings; 0 controls: 0 red as planted, 0 missed; "
        "0 limit problems")
    lines = [line for line in split.stdout.splitlines() if line.startswith("np_prompt_d128_g4 gate 4")]
    assert [line.split(": pass")[0] for line in lines] == [
        f"np_prompt_d128_g4 gate 4 exact-sum inputs (case {case})" for case in
        ("mirror-A/linear1024", "mirror-B/linear1024", "mirror-C/linear1024")]


def test_a_split_gates_cases_start_longest_first_by_their_share_of_its_outputs():
    loaded = load_contract(str(ROOT / CPU), import_kernels=False)
    (task,) = plan_tasks(loaded, CPU, Selection(only=("np_prompt_d128_g4",), gate=4, no_controls=True))
    key = (task.kind, task.name, 4)
    outputs = {key: {"mirror-A/linear1024": 100, "mirror-B/linear1024": 100, "mirror-C/linear1024": 600,
                     "mirror-C/linear1024/order_probes": 200}}
    durations = {key: 50.0}
    split = split_by_case(loaded, [task], durations, outputs)
    assert [t.case for t in split] == ["mirror-A/linear1024", "mirror-B/linear1024", "mirror-C/linear1024"]
    assert [durations[(*key, t.case)] for t in split] == [5.0, 5.0, 40.0]
    assert [split[i].case for i in start_order(split, durations)] == [
        "mirror-C/linear1024", "mirror-A/linear1024", "mirror-B/linear1024"]
    unshared = {key: 50.0}
    assert split_by_case(loaded, [task], unshared) == split and unshared == {key: 50.0}  # no shares: the gate's
