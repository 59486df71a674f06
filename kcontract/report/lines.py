"""One plain line per entry x gate (and per task that did not run): the CI log's verdicts, never truncated."""

from __future__ import annotations

from kcontract.gatetable import Kind, gate
from kcontract.gates.base import GateResult
from kcontract.verdict.summary import gates_phrase
from kcontract.verdict.outcome import Outcome, Task


def who(task: Task) -> str:
    """`my_entry` or `control my_fault (for my_entry)`."""
    return task.name if task.kind == "entry" else f"control {task.name} (for {task.entry})"


def counts(result: GateResult) -> str:
    """The counts that matter for the gate's kind."""
    if result.skipped:
        return "nothing ran"
    kind = gate(result.gate).kind
    if kind is Kind.RANGES:
        line = (f"{result.checked} checked, {result.decided} decided ({result.facts.get('decided_pct', 0.0):g} %), "
                f"{result.bit_equal} bit-equal, {result.within} within, {result.failures} failures")
        parts = result.facts.get("by_output") or {}
        return line + "".join(f"; {name} {c['checked']} checked, {c['decided']} decided, {c['failures']} failures"
                              for name, c in parts.items())
    if kind is Kind.INVARIANCE:
        return (f"{result.checked} compared over {result.facts.get('variants', 0)} variants, "
                f"{result.bit_equal} bit-equal, {result.failures} failures{order_probes(result)}")
    return (f"{result.checked} symbol x SM rows, {result.failures} failures, "
            f"{result.facts.get('limit_problems', 0)} limit problems")


def order_probes(result: GateResult) -> str:
    """`; order probes tell apart 7 of 7 orders` (the fewest over the cases, naming those another order matches)."""
    probes = result.facts.get("order_probes") or {}
    if not probes:
        return ""
    worst = min(probes.values(), key=lambda p: (p["told_apart"] - p["of"], p["told_apart"]))
    alike = f" (alike: {', '.join(worst['alike'])})" if worst["alike"] else ""
    return f"; order probes tell apart {worst['told_apart']} of {worst['of']} orders{alike}"


def gate_line(task: Task, result: GateResult) -> str:
    """`entry gate 1 exactness vs float64: pass, 4096 checked, ..., 2.1 s`, naming the case where the task ran one
    (`(case at_8000)`)."""
    case = f" (case {task.case})" if task.case else ""
    text = (f"{who(task)} gate {result.gate} {gate(result.gate).title}{case}: {result.status}, {counts(result)}, "
            f"{result.seconds:.1f} s")
    return text + (f" ({result.message.removeprefix('skipped: ')})" if result.skipped else "")


def status_line(outcome: Outcome) -> str:
    """`entry gate 2: crashed: worker died (signal SIGABRT), 0.3 s` for a task that did not run to the end."""
    tail = "; a control that does not run counts as missed" if outcome.task.kind == "control" else ""
    gates = f" {gates_phrase(outcome.task.gates)}" if outcome.task.gates else ""
    return f"{who(outcome.task)}{gates}: {outcome.status}: {outcome.detail.strip()}, {outcome.seconds:.1f} s{tail}"
