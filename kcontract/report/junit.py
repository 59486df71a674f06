"""The run as JUnit XML: one test case per entry x gate and per control, for CI dashboards."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from kcontract.gatetable import gate as gate_row
from kcontract.verdict.summary import Summary
from kcontract.verdict.outcome import Outcome


def junit_document(entries: list[Outcome], controls: list[Outcome], planted: dict[str, int],
                   summary: Summary) -> ET.ElementTree:
    """A <testsuites> tree; failures carry the gate's message, worst offender and replay command."""
    suite = ET.Element("testsuite", name="kcontract")
    for o in entries:
        for gate in o.task.gates:
            case = ET.SubElement(suite, "testcase", classname=o.task.name, name=f"gate {gate} {gate_row(gate).title}")
            r = o.gates.get(gate)
            case.set("time", f"{r.seconds:.3f}" if r else "0")
            if o.status != "ran":
                ET.SubElement(case, "error", message=f"{o.status}: {_first_line(o.detail)}").text = \
                    (o.detail + ("\n" + o.trace if o.trace else ""))
            elif r.skipped:
                ET.SubElement(case, "skipped", message=r.message)
            elif not r.passed:
                worst = f"worst: {r.worst}\n" if r.worst else ""
                causes = f"usual causes: {'; '.join(r.causes)}\n" if r.causes else ""
                ET.SubElement(case, "failure", message=r.message).text = f"{worst}{causes}replay: {r.replay}"
    for o in controls:
        gate = planted[o.task.name]
        case = ET.SubElement(suite, "testcase", classname="controls", name=f"{o.task.name} red at gate {gate}")
        if o.status != "ran":
            ET.SubElement(case, "failure", message=f"missed: {o.status}: {_first_line(o.detail)}").text = o.detail
        elif gate not in o.failed_gates():
            ET.SubElement(case, "failure", message=f"missed: gate {gate} passed").text = o.detail
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(len(suite.findall("testcase/failure"))))
    suite.set("errors", str(len(suite.findall("testcase/error"))))
    ET.SubElement(suite, "system-out").text = summary.line()
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.ElementTree(root)


def _first_line(text: str) -> str:
    """The first line of a detail, for a message attribute."""
    return text.strip().splitlines()[0] if text.strip() else "no detail"


def write_junit(path: str, tree: ET.ElementTree) -> None:
    """Write the XML, creating parent folders."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
