"""End-of-run report: tables in a terminal, then each failure's worst offender and replay command.

Tables fold long cells onto more lines instead of cutting them, so no name or number is ever truncated.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kcontract.gatetable import gate as gate_row
from kcontract.report.lines import status_line, who
from kcontract.verdict.outcome import Outcome


def _table(title: str, columns: tuple[str, ...], numeric: tuple[str, ...] = ()) -> Table:
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="right" if col in numeric else "left", overflow="fold")
    return table


def entry_table(outcomes: list[Outcome]) -> Table:
    """Entries by gate: verdict, outputs checked, decided share, failures and seconds."""
    table = _table("entries", ("entry", "gate", "verdict", "checked", "decided", "failures", "s"),
                   ("checked", "decided", "failures", "s"))
    for o in outcomes:
        if o.status != "ran":
            table.add_row(Text(o.task.name), "all", Text(o.status, style="red"), "", "", "", f"{o.seconds:.1f}")
            continue
        for gate, r in sorted(o.gates.items()):
            verdict = Text(r.status, style="red" if r.status == "FAIL" else ("yellow" if r.skipped else "green"))
            decided = f"{r.facts['decided_pct']:g} %" if "decided_pct" in r.facts else ""
            table.add_row(Text(o.task.name), f"{gate} {gate_row(gate).title}", verdict, str(r.checked), decided,
                          str(r.failures), f"{r.seconds:.1f}")
    return table


def profile_table(outcomes: list[Outcome]) -> Table:
    """Per task and gate: seconds by stage, peak host and GPU memory, references from the cache."""
    cols = ("task", "gate", "in", "ref", "run", "cmp", "other", "host", "GPU", "refs")
    table = _table("profile: seconds making inputs, references, running, comparing; peak MB", cols, cols[1:9])
    table.box, table.padding, table.pad_edge = box.SIMPLE_HEAD, (0, 1), False
    table.columns[0].min_width = 18
    for o in outcomes:
        for gate, r in sorted(o.gates.items()):
            p = r.profile
            if not p:
                continue
            table.add_row(Text(o.task.name), str(gate), *(f"{p[f'{s}_s']:.1f}" for s in
                                                          ("inputs", "reference", "launch", "compare", "other")),
                          f"{p['peak_host_mb']:.0f}", f"{p['peak_gpu_mb']:.0f}", reference_use(p["references"]))
    return table


def reference_use(counts: dict[str, int]) -> str:
    """'3 hit', '2 new', '1 hit 1 new', 'off' or '' from a gate's reference-cache counts (new: computed now)."""
    words = [f"{counts[k]} {w}" for k, w in (("hit", "hit"), ("miss", "new"), ("rebuilt", "rebuilt"))
             if counts.get(k)]
    return " ".join(words) or ("off" if counts.get("off") else "")


def control_table(outcomes: list[Outcome], planted: dict[str, int]) -> Table:
    """Controls: the planted gate, where each went red, and the verdict."""
    table = _table("controls", ("control", "planted at", "red at", "verdict"))
    for o in outcomes:
        red = o.failed_gates() if o.status == "ran" else []
        gate = planted[o.task.name]
        verdict = Text("red as planted", style="green") if gate in red else Text(f"missed ({o.status})", style="red")
        table.add_row(Text(o.task.name), str(gate), " ".join(map(str, red)) or "none", verdict)
    return table


def print_failures(console: Console, outcomes: list[Outcome], *, planted: dict[str, int] | None = None,
                   verbose: bool = False) -> None:
    """Each red gate's message, worst offender and replay; a control red as planted gets one line of evidence.

    Tasks that did not run were reported as they ended; here they get their traceback with --verbose.
    """
    for o in outcomes:
        if o.status == "ran":
            _print_outcome(console, o, planted[o.task.name] if planted is not None else None, verbose)
        elif verbose and o.trace:
            _say(console, f"{status_line(o)}\n{o.trace.rstrip()}")


def _print_outcome(console: Console, o: Outcome, planted: int | None, verbose: bool) -> None:
    """A task that ran: a control red as planted in one line (unless verbose), else each red gate; a control
    not red at its planted gate says it missed."""
    red = [(g, r) for g, r in sorted(o.gates.items()) if not r.passed]
    if planted in [g for g, _ in red] and not verbose:
        trial = f" (on trial {o.gates[planted].facts['trials']})" if "trials" in o.gates[planted].facts else ""
        _say(console, f"{who(o.task)}: red as planted at gate {planted}{trial}: {o.gates[planted].message}")
        return
    for gate, result in red:
        _print_red(console, o, gate, result)
    if planted is not None and planted not in [g for g, _ in red]:
        _say(console, f"{who(o.task)}: MISSED: gate {planted} passed; the planted fault went unseen")


def _print_red(console: Console, o: Outcome, gate: int, r) -> None:
    """One red gate: its message, worst offender, usual causes and replay command."""
    _say(console, f"{who(o.task)} gate {gate} ({gate_row(gate).title}): {r.message}")
    if r.worst:
        w = r.worst
        where = ", ".join(f"{k} {v}" for k, v in w.coords.items())
        _say(console, f"  worst: case {w.case}{', ' + where if where else ''}: got {w.got}, expected "
                      f"{w.expected}{'; ' + w.detail if w.detail else ''}")
    if r.causes:
        _say(console, f"  usual causes: {'; '.join(r.causes)}")
    _say(console, f"  replay: {r.replay}")


def _say(console: Console, line: str) -> None:
    """A line as it is: no markup, no highlighting."""
    console.print(line, markup=False, highlight=False)
