"""GitHub Actions output of a run: error annotations for what failed, and the run in the step summary.

Annotations point at the contract line where each failing entry or missed control starts; GitHub shows ten
errors per step, so at most ten are printed and one warning counts the rest. The step summary (markdown appended
to `$GITHUB_STEP_SUMMARY`) holds the SUMMARY line, a verdict per entry x gate, the controls and every failure,
kept under GitHub's 1 MiB limit. Outside GitHub Actions nothing is printed or written.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from kcontract.contract.loaded import LoadedContract
from kcontract.contract.paths import resolve_source
from kcontract.gatetable import gate as gate_row
from kcontract.gatetable import records_gate
from kcontract.report.lines import status_line
from kcontract.report.tables import print_failures
from kcontract.verdict.outcome import Outcome, Task
from kcontract.verdict.summary import Summary, gates_phrase, plural

MAX_ANNOTATIONS = 10  # error annotations GitHub shows per step
SUMMARY_BYTES = (1 << 20) - (8 << 10)  # GitHub refuses a step summary over 1 MiB; this leaves room for others
MAX_LISTED = 200  # failures listed in the step summary
_RESERVE = 512  # bytes kept for the lines that say what was left out


@dataclass
class Failure:
    """One failing entry x gate, crashed task or missed control: where it is and kcontract's own words for it."""

    title: str
    text: str  # the lines kcontract prints for it, replay command included
    line: int | None  # where its entry or control starts in the contract file


def emit(loaded: LoadedContract, contract_path: str, entries: list[Outcome], controls: list[Outcome],
         summary: Summary, planted: dict[str, int], environ: Mapping[str, str] = os.environ,
         write: Callable[[str], object] = print) -> None:
    """Where GITHUB_ACTIONS=true: error annotations for failing gates and missed controls (at most 10), and the
    SUMMARY plus a per-entry table in $GITHUB_STEP_SUMMARY; elsewhere nothing."""
    if environ.get("GITHUB_ACTIONS") != "true":
        return
    entries, controls = _in_contract_order(loaded, entries), _in_contract_order(loaded, controls)
    failures = collect(loaded, contract_path, entries, controls, summary, planted, environ)
    file = shown_path(contract_path, environ)
    for failure in failures[:MAX_ANNOTATIONS]:
        write(annotation("error", failure.text, file=file, line=failure.line, title=failure.title))
    if len(failures) > MAX_ANNOTATIONS:
        rest = plural(len(failures) - MAX_ANNOTATIONS, "more failure")
        write(annotation("warning", f"{rest} not annotated: see the step summary or the log"))
    target = environ.get("GITHUB_STEP_SUMMARY")
    if target:
        budget = SUMMARY_BYTES - _size(target)
        append_summary(target, step_summary(loaded, file, entries, controls, summary, planted, failures, budget))


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: the message's escapes, and ':' and ','."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, **properties: object) -> str:
    """`::error file=F,line=N,title=T::MESSAGE`; properties that are None are left out."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v is not None)
    return f"::{level}{' ' + props if props else ''}::{escape_data(message)}"


def shown_path(path: str | Path, environ: Mapping[str, str]) -> str:
    """`path` relative to $GITHUB_WORKSPACE where it lies inside it, else as given."""
    workspace = environ.get("GITHUB_WORKSPACE")
    if workspace:
        for full, root in ((os.path.abspath(path), os.path.abspath(workspace)),
                           (os.path.realpath(path), os.path.realpath(workspace))):
            try:
                return Path(full).relative_to(root).as_posix()
            except ValueError:
                continue
    return Path(path).as_posix()


def collect(loaded: LoadedContract, contract_path: str, entries: list[Outcome], controls: list[Outcome],
            summary: Summary, planted: dict[str, int], environ: Mapping[str, str]) -> list[Failure]:
    """Every failure in order: entries' red gates (known findings aside) and tasks that did not run, missed
    controls, then record files of entries that are gone."""
    accepted = {(k.entry, k.gate) for k in loaded.known_findings}
    found: list[Failure] = []
    for o in entries:
        line, kernel = _line(loaded, o.task), _kernel(loaded, contract_path, o.task.name, environ)
        if o.status != "ran":
            found.append(_not_run(o, line, kernel))
        for number, result in sorted(o.gates.items()):
            if not result.passed and (o.task.name, number) not in accepted:
                text = _printed(dataclasses.replace(o, status="ran", gates={number: result})) + kernel
                found.append(Failure(f"kcontract {_gate(number)}: {o.task.name}", text, line))
    for o in controls:
        number = planted[o.task.name]
        if o.status == "ran" and number in o.failed_gates():
            continue
        line = _line(loaded, o.task)
        if o.status != "ran":
            found.append(_not_run(o, line, ""))
        else:
            text = f"{_printed(o, planted)}\n  replay: {_replay(o.task, [number])}"
            found.append(Failure(f"kcontract {_gate(number)}: control {o.task.name} missed", text, line))
    records = records_gate().number
    found += [Failure(f"kcontract {_gate(records)}", f"gate {records}: {note}", None) for note in summary.notes]
    return found


def step_summary(loaded: LoadedContract, file: str, entries: list[Outcome], controls: list[Outcome],
                 summary: Summary, planted: dict[str, int], failures: list[Failure],
                 budget: int = SUMMARY_BYTES) -> str:
    """The run in markdown: SUMMARY, entries by gate, controls and failures, within `budget` bytes."""
    doc = _Doc(budget)
    if not doc.add(f"## kcontract run: `{file}`\n\n```\n{summary.line()}\n```\n"):
        return ""
    gates = sorted({g for o in entries for g in o.task.gates})
    if entries:
        head = ["entry", "family", *(f"gate {g}" for g in gates), "seconds"]
        rows = [[o.task.name, _family(loaded, o.task.name), *(_cell(loaded, o, g) for g in gates),
                 f"{o.seconds:.1f}"] for o in entries]
        doc.table(head, rows, "entries")
    if controls:
        rows = [[o.task.name, o.task.entry, _gate(planted[o.task.name]), _control_verdict(o, planted)]
                for o in controls]
        doc.table(["control", "entry", "planted at", "verdict"], rows, "controls")
    if failures:
        blocks = [f"- **{_md(f.title)}**{f' (`{file}` line {f.line})' if f.line else ''}\n\n"
                  f"  ```\n{_indent(f.text)}\n  ```\n" for f in failures]
        doc.items(f"\n### {plural(len(failures), 'failure')}\n\n", blocks, "failures", MAX_LISTED)
    return doc.text()


def add_to_step_summary(text: str, environ: Mapping[str, str] = os.environ) -> None:
    """Append markdown to `$GITHUB_STEP_SUMMARY` where it is set, whole where it fits GitHub's limit beside what
    earlier steps wrote there (else one note says it is full); elsewhere nothing."""
    target = environ.get("GITHUB_STEP_SUMMARY")
    if target:
        append_summary(target, text if len(text.encode()) <= SUMMARY_BYTES - _size(target) else "")


def append_summary(target: str, text: str) -> None:
    """Append to the step summary file; a file that cannot be written is one note on stderr."""
    if not text:
        print(f"note: the GitHub step summary {target} is full; kcontract wrote nothing to it", file=sys.stderr)
        return
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        print(f"note: cannot write the GitHub step summary {target}: {error.strerror or error}", file=sys.stderr)


def _size(path: str) -> int:
    """Bytes already in the step summary (earlier steps' writers share it), 0 where unknown."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class _Doc:
    """Markdown built piece by piece, each list cut where the byte budget ends, saying what was left out."""

    def __init__(self, budget: int):
        self.parts: list[str] = []
        self.size, self.budget = 0, budget

    def add(self, text: str) -> bool:
        """Append `text` if it fits beside the reserve for a left-out line."""
        size = len(text.encode())
        if self.size + size + _RESERVE > self.budget:
            return False
        self.parts.append(text)
        self.size += size
        return True

    def items(self, head: str, blocks: list[str], what: str, cap: int | None = None) -> None:
        """A heading and as many blocks as fit (at most `cap`), then how many were left out."""
        kept = 0
        if self.add(head):
            for block in blocks[:cap]:
                if not self.add(block):
                    break
                kept += 1
        if kept < len(blocks):
            note = f"\n{len(blocks) - kept} {what} left out of the step summary; see the log.\n"
            self.parts.append(note)  # within the reserve every add keeps
            self.size += len(note.encode())

    def table(self, head: list[str], rows: list[list[str]], what: str) -> None:
        """A markdown table of as many rows as fit."""
        lines = [f"| {' | '.join(map(_md, r))} |\n" for r in rows]
        self.items(f"\n| {' | '.join(head)} |\n|{'---|' * len(head)}\n", lines, f"{what} rows")

    def text(self) -> str:
        """The document."""
        return "".join(self.parts)


def _in_contract_order(loaded: LoadedContract, outcomes: list[Outcome]) -> list[Outcome]:
    """Outcomes in the order the contract lists their entries or controls (unknown names last, as given)."""
    order = {("entry", e.name): e.index for e in loaded.entries}
    order |= {("control", c.name): c.index for c in loaded.controls}
    return sorted(outcomes, key=lambda o: order.get((o.task.kind, o.task.name), len(order)))


def _line(loaded: LoadedContract, task: Task) -> int | None:
    """The contract line where the task's entry or control starts."""
    items = loaded.entries if task.kind == "entry" else loaded.controls
    return next((item.line for item in items if item.name == task.name), None)


def _family(loaded: LoadedContract, name: str) -> str:
    """The entry's family name ('' for a name the contract lacks)."""
    return next((e.family_name for e in loaded.entries if e.name == name), "")


def _kernel(loaded: LoadedContract, contract_path: str, name: str, environ: Mapping[str, str]) -> str:
    """`\\n  kernel: kernels/x.cu` for a CUDA entry (its source as the workspace sees it), else ''."""
    entry = next((e for e in loaded.entries if e.name == name), None)
    if entry is None or entry.kernel.compiled is None:
        return ""
    source = resolve_source(Path(contract_path).parent, entry.kernel.compiled.source)
    return f"\n  kernel: {shown_path(source, environ)}"


def _gate(number: int) -> str:
    """`gate 2 order independence`."""
    return f"gate {number} {gate_row(number).title}"


def _printed(outcome: Outcome, planted: dict[str, int] | None = None) -> str:
    """What the end-of-run report prints for the outcome's red gates (or the control's miss), as plain text."""
    console = Console(file=io.StringIO(), soft_wrap=True, highlight=False, emoji=False, color_system=None,
                      force_terminal=False, force_jupyter=False)
    print_failures(console, [outcome], planted=planted)
    return console.file.getvalue().rstrip()


def _not_run(outcome: Outcome, line: int | None, kernel: str) -> Failure:
    """A task that crashed, timed out or raised: its status line and the command that reruns it."""
    missing = [g for g in outcome.task.gates if g not in outcome.gates] or list(outcome.task.gates)
    shown = dataclasses.replace(outcome, task=dataclasses.replace(outcome.task, gates=missing))
    text = f"{status_line(shown)}\n  replay: {_replay(outcome.task, missing)}{kernel}"
    name = f"control {outcome.task.name}" if outcome.task.kind == "control" else outcome.task.name
    where = _gate(missing[0]) if len(missing) == 1 else gates_phrase(missing)
    return Failure(f"kcontract {where} {outcome.status}: {name}", text, line)


def _replay(task: Task, gates: list[int]) -> str:
    """The command that reruns the task at `gates` (one gate: that gate alone)."""
    target = ["--control", task.name] if task.kind == "control" else ["--only", task.name]
    words = ["kcontract", "run", "--contract", task.contract_path, *target,
             *(["--gate", str(gates[0])] if len(gates) == 1 else []), "--seed", str(task.seed),
             *(["--case", task.case] if task.case else [])]
    return " ".join(shlex.quote(w) for w in words)


def _cell(loaded: LoadedContract, outcome: Outcome, number: int) -> str:
    """pass, FAIL, known, skip, the status of a task that did not run, or '' for a gate it did not cover."""
    result = outcome.gates.get(number)
    if result is None:
        return outcome.status if number in outcome.task.gates and outcome.status != "ran" else ""
    if not result.passed and not result.skipped:
        return "known" if any((k.entry, k.gate) == (outcome.task.name, number) for k in loaded.known_findings) \
            else "FAIL"
    return result.status


def _control_verdict(outcome: Outcome, planted: dict[str, int]) -> str:
    """`red as planted`, `MISSED (gate 2 passed)` or `MISSED (crashed)`."""
    number = planted[outcome.task.name]
    if outcome.status != "ran":
        return f"MISSED ({outcome.status})"
    return "red as planted" if number in outcome.failed_gates() else f"MISSED (gate {number} passed)"


def _md(text: str) -> str:
    """Text safe inside a markdown table cell or bold run."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("*", "\\*")


def _indent(text: str) -> str:
    """Lines indented into a list item's code block, fences in the text defused."""
    return "\n".join("  " + line for line in text.replace("```", "'''").splitlines())
