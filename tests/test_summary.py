"""SUMMARY counting: entries, known findings, controls red as planted or missed, exit codes."""

from __future__ import annotations

from xml.etree import ElementTree

from kcontract.contract.model import KnownFinding
from kcontract.gates.base import GateResult
from kcontract.report.junit import junit_document, write_junit
from kcontract.verdict.summary import summarise
from kcontract.verdict.outcome import Outcome, Task


def outcome(name, red=(), status="ran", kind="entry", gates=(1, 2, 3, 4)):
    task = Task(kind, name, name, "c.yaml", list(gates), 1)
    o = Outcome(task, status=status)
    if status == "ran":
        o.gates = {g: GateResult(g, passed=g not in red, checked=1) for g in gates}
    return o


def test_summary_line_format_and_exit_codes():
    s = summarise([outcome("a"), outcome("b", red=(2,))], [outcome("c1", red=(3,), kind="control")], [],
                  {"c1": 3})
    assert s.line() == ("SUMMARY 2 kernels: 1 pass gates 1-4, 1 fail, 0 known findings; 1 controls: "
                        "1 red as planted, 0 missed; 0 limit problems")
    assert s.exit_code == 1


def test_known_finding_counts_and_does_not_fail():
    s = summarise([outcome("a", red=(2,))], [], [KnownFinding(entry="a", gate=2, reason="r")], {})
    assert (s.passed, s.failed, s.known, int(s.exit_code)) == (1, 0, 1, 0)


def test_control_red_elsewhere_or_crashed_is_missed():
    controls = [outcome("c1", red=(1,), kind="control"), outcome("c2", status="crashed", kind="control")]
    s = summarise([outcome("a")], controls, [], {"c1": 3, "c2": 4})
    assert (s.red, s.missed, s.missed_controls, int(s.exit_code)) == (0, 2, ["c1", "c2"], 1)


def test_crashed_entry_fails_even_with_a_known_finding():
    s = summarise([outcome("a", status="timed out")], [], [KnownFinding(entry="a", gate=1, reason="r")], {})
    assert s.failed == 1


def test_a_known_finding_that_passes_now_is_reported_stale():
    s = summarise([outcome("a")], [], [KnownFinding(entry="a", gate=2, reason="r")], {})
    assert s.stale_known == ["a gate 2"] and s.known == 0 and s.passed == 1


def test_junit_has_a_case_per_entry_gate_and_control(tmp_path):
    entries = [outcome("a"), outcome("b", red=(2,)), outcome("c", status="crashed")]
    controls = [outcome("c1", red=(3,), kind="control"), outcome("c2", kind="control")]
    s = summarise(entries, controls, [], {"c1": 3, "c2": 4})
    path = tmp_path / "junit.xml"
    write_junit(str(path), junit_document(entries, controls, {"c1": 3, "c2": 4}, s))
    suite = ElementTree.parse(path).getroot()[0]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("14", "2", "4")


def records(o: Outcome, passed: bool = True, findings=(), limit_problems: int = 0) -> Outcome:
    """Give an outcome a gate-5 result."""
    o.task.gates = sorted(set(o.task.gates) | {5})
    o.gates[5] = GateResult(5, passed=passed, checked=1,
                            facts={"toolchain_findings": list(findings), "limit_problems": limit_problems})
    return o


def test_every_shape_of_the_line():
    finding = "no records for nvrtc-13.0.88+headers-13.0.96 (records exist for cuda-13.5.37): ..."
    tail = "0 known findings; 0 controls: 0 red as planted, 0 missed; 0 limit problems"
    whole = summarise([records(outcome("a")), records(outcome("b"))], [], [], {})
    assert whole.line() == f"SUMMARY 2 kernels: 2 pass gates 1-4, 0 fail, {tail}"
    gate1 = summarise([outcome("a", gates=(1,))], [], [], {})
    assert gate1.line() == f"SUMMARY 1 kernels: 1 pass gate 1, 0 fail, {tail}"
    assert summarise([outcome("a", gates=(1, 3))], [], [], {}).line().startswith("SUMMARY 1 kernels: 1 pass gates "
                                                                                 "1 and 3, ")
    assert "pass gates 1, 2 and 4," in summarise([outcome("a", gates=(1, 2, 4))], [], [], {}).line()
    assert "pass gates 1-3," in summarise([outcome("a", gates=(1, 2, 3))], [], [], {}).line()
    gate5 = summarise([records(outcome("a", gates=())), records(outcome("b", gates=()), passed=False)], [], [], {})
    assert gate5.line() == f"SUMMARY 2 kernels: 1 pass gate 5, 1 fail, {tail}" and gate5.exit_code == 1
    stale = summarise([records(outcome("a"), passed=False), records(outcome("b"))], [], [], {})
    assert stale.line() == f"SUMMARY 2 kernels: 2 pass gates 1-4, 0 fail, {tail}; 1 record failure"
    assert stale.exit_code == 1 and stale.record_failures == ["a"]
    orphan = summarise([records(outcome("a"))], [], [], {}, ["records/x/gone.json: a record for `gone` ..."])
    assert orphan.line().endswith("; 1 record failure") and orphan.exit_code == 1
    found = summarise([records(outcome("a"), findings=[finding]), records(outcome("b"), findings=[finding])], [],
                      [], {})
    assert found.line() == f"SUMMARY 2 kernels: 2 pass gates 1-4, 0 fail, {tail}; 1 toolchain finding"
    assert found.exit_code == 0 and found.findings == [finding]
    case = summarise([outcome("a", gates=(1,))], [], [], {}, case="at_8000")
    assert "1 pass gate 1 (case at_8000), 0 fail" in case.line()
    limits = summarise([records(outcome("a"), limit_problems=3)], [], [], {})
    assert limits.line().endswith("; 3 limit problems") and limits.exit_code == 0


def test_an_interrupted_run_says_so_and_exits_130():
    s = summarise([outcome("a"), outcome("b", status="interrupted")], [], [], {})
    assert s.interrupted and int(s.exit_code) == 130 and s.line().endswith("; interrupted")
