"""Rich tables for a run: one verdict row per entry x gate, controls by gate, the worst offenders."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kcontract.gates import GATES
from kcontract.runner.outcome import Outcome


def gate_cell(outcome: Outcome, gate: int) -> str:
    """'pass', 'FAIL', or the reason a gate has no result."""
    if outcome.status != "ran":
        return outcome.status
    result = outcome.gates.get(gate)
    return "-" if result is None else result.status


def entry_table(outcomes: list[Outcome]) -> Table:
    """Entries by gate, with counts for the range gates."""
    table = Table(title="entries", show_lines=False)
    for col in ("entry", "gate", "verdict", "checked", "decided", "bit-equal", "within", "failures", "facts", "s"):
        table.add_column(col, justify="right" if col not in ("entry", "gate", "verdict", "facts") else "left")
    for o in outcomes:
        if o.status != "ran":
            table.add_row(o.task.name, "all", f"[red]{o.status}[/red]", "", "", "", "", "", o.detail.splitlines()[0],
                          f"{o.seconds:.1f}")
            continue
        for gate, r in sorted(o.gates.items()):
            verdict = "[green]pass[/green]" if r.passed else "[red]FAIL[/red]"
            facts = ", ".join(f"{k} {v}" for k, v in r.facts.items())
            table.add_row(o.task.name, f"{gate} {GATES[gate].TITLE}", verdict, str(r.checked), str(r.decided),
                          str(r.bit_equal), str(r.within), str(r.failures), facts, f"{r.seconds:.1f}")
    return table


def control_table(outcomes: list[Outcome], planted: dict[str, int]) -> Table:
    """Controls: the planted gate, where each went red, and the verdict."""
    table = Table(title="controls")
    for col in ("control", "planted at", "red at", "verdict"):
        table.add_column(col)
    for o in outcomes:
        red = o.failed_gates() if o.status == "ran" else []
        gate = planted[o.task.name]
        verdict = "[green]red as planted[/green]" if gate in red else f"[red]missed[/red] ({o.status})"
        table.add_row(o.task.name, str(gate), " ".join(map(str, red)) or "none", verdict)
    return table


def print_failures(console: Console, outcomes: list[Outcome], kind: str = "entry") -> None:
    """One block per red gate: the worst offender and the replay command (controls: the evidence)."""
    for o in outcomes:
        name = f"{kind} {o.task.name}" if kind != "entry" else o.task.name
        if o.status != "ran":
            tail = " (counts as missed)" if kind == "control" else ""
            console.print(f"[red]{name}[/red]: {o.status}: {o.detail.strip()}{tail}", markup=True)
            continue
        for gate, r in sorted(o.gates.items()):
            if r.passed:
                continue
            console.print(f"[red]{name} gate {gate}[/red] ({GATES[gate].TITLE}): {r.message}")
            if r.worst:
                w = r.worst
                where = ", ".join(f"{k} {v}" for k, v in w.coords.items())
                console.print(f"  worst: case {w.case}, {where}: got {w.got}, expected {w.expected}; {w.detail}",
                              markup=False)
            console.print(f"  replay: {r.replay}", markup=False)
