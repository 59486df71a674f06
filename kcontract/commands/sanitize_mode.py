"""`kcontract run --sanitize`: the selected CUDA entries and controls under compute-sanitizer, a line each."""

from __future__ import annotations

import fnmatch
import json
import sys
from dataclasses import asdict
from pathlib import Path

from rich.table import Table
from rich.text import Text

from kcontract.commands.common import out
from kcontract.commands.preflight import preflight
from kcontract.errors import UsageError
from kcontract.machine import usable_cores
from kcontract.sanitizer import TOOLS, sanitize, targets, verdict

TIMEOUT = 600.0  # seconds one sanitized launch may take (racecheck runs a kernel some 100 times slower)


def sanitize_run(loaded, contract_path: str, selection, jobs, json_path: str | None, refused: bool = False) -> None:
    """Run the sanitizer pass and exit: 0 when every entry is clean and every planted sanitizer control red;
    `refused`: the run was also given an option the pass cannot honour (--shard, --receipt, --junit)."""
    if refused or selection.gate is not None or selection.case is not None or selection.seed is not None:
        raise UsageError("--sanitize runs each entry's smallest case at the contract's seed: drop --gate, --case, "
                         "--seed, --shard, --receipt and --junit")
    only, controls, no_controls = selection.only, selection.controls, selection.no_controls
    entries = [e for e in loaded.entries if not only or any(fnmatch.fnmatch(e.name, g) for g in only)]
    found = targets(loaded, entries, with_controls=not no_controls)
    if controls:
        found = [t for t in found if t.kind == "control" and t.name in controls]
    if not found:
        raise UsageError("--sanitize: no CUDA entry or control selected (the sanitizer runs CUDA kernels only)")
    preflight(loaded, contract_path, cuda=True, gpu=True, outputs={"json": json_path}, names=[t.name for t in found])
    planted = {c.name: c.sanitize for c in loaded.controls if c.sanitize and c.name in {t.name for t in found}}
    workers = usable_cores() if jobs == "auto" else int(jobs)

    def report(finding) -> None:
        who = f"{'control ' if finding.target.kind == 'control' else ''}{finding.target.name}"
        extra = f": {finding.detail}" if finding.detail else ""
        out.print(f"{who} {finding.target.case} {finding.tool}: {finding.status}"
                  f"{f' ({finding.errors} errors)' if finding.errors else ''}, {finding.seconds:.1f} s{extra}",
                  markup=False, highlight=False)

    findings = sanitize(contract_path, found, TOOLS, workers, TIMEOUT, report)
    passed, line = verdict(findings, planted)
    if out.is_terminal:
        out.print(findings_table(findings))
    if json_path:
        Path(json_path).write_text(json.dumps({"summary": line, "passed": passed,
                                               "findings": [asdict(f) for f in findings]}, indent=1) + "\n")
    out.print(line, markup=False)
    sys.exit(0 if passed else 1)


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
