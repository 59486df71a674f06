"""`kcontract run --sanitize`: the selected CUDA entries and controls under compute-sanitizer, a line each."""

from __future__ import annotations

import sys

from rich.table import Table
from rich.text import Text

from kcontract.commands.common import err, out
from kcontract.sanitizer import TOOLS
from kcontract.session.sanitize import sanitize_session, sanitize_targets


def sanitize_run(session, selection, jobs, json_path: str | None, refused: bool = False) -> None:
    """Run the sanitizer pass and exit: 0 when every entry is clean and every planted sanitizer control red;
    `refused`: the run was also given an option the pass cannot honour (--shard, --receipt, --junit)."""
    found = sanitize_targets(session.loaded, selection, refused)
    done = sanitize_session(session, found, jobs, json_path, lambda line: err.print(line, markup=False),
                            finding_line)
    if out.is_terminal:
        out.print(findings_table(done.findings))
    out.print(done.line, markup=False)
    sys.exit(0 if done.passed else 1)


def finding_line(finding) -> None:
    """`control NAME CASE TOOL: STATUS (N errors), S s: detail`."""
    who = f"{'control ' if finding.target.kind == 'control' else ''}{finding.target.name}"
    extra = f": {finding.detail}" if finding.detail else ""
    errors = f" ({finding.errors} errors)" if finding.errors else ""
    out.print(f"{who} {finding.target.case} {finding.tool}: {finding.status}{errors}, {finding.seconds:.1f} s{extra}",
              markup=False, highlight=False)


def findings_table(findings) -> Table:
    """Targets by tool: clean, or how many errors."""
    table = Table(title="compute-sanitizer")
    table.add_column("kernel", overflow="fold")
    for tool in TOOLS:
        table.add_column(tool, justify="right")
    rows: dict[str, dict[str, str]] = {}
    for f in findings:
        cell = "clean" if f.status == "clean" else (f"{f.errors} errors" if f.status == "errors" else f.status)
        rows.setdefault(f.target.name, {})[f.tool] = cell
    for name, cells in rows.items():
        table.add_row(Text(name), *(Text(cells.get(t, ""), style="green" if cells.get(t) == "clean" else "red")
                                    for t in TOOLS))
    return table
