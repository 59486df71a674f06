"""`run --sanitize` as a session step: the selected CUDA entries and controls under compute-sanitizer, judged;
nothing printed here."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from kcontract.errors import UsageError
from kcontract.capacity import usable_cores
from kcontract.session.plan import picked
from kcontract.sanitizer import TOOLS, Finding, Target, sanitize, targets, verdict

TIMEOUT = 600.0  # seconds one sanitized launch may take (racecheck runs a kernel some 100 times slower)
REFUSED = ("--sanitize runs each entry's smallest case at the contract's seed: drop --gate, --case, --seed, --shard, "
           "--receipt, --junit and --interpret")


@dataclass
class Sanitized:
    """Every finding, whether the pass passed, and its closing line."""

    findings: list[Finding]
    passed: bool
    line: str


def sanitize_targets(loaded, selection, refused: bool) -> list[Target]:
    """The targets a selection names; `refused`: the run was also given an option the pass cannot honour."""
    if refused or _gate_options(selection):
        raise UsageError(REFUSED)
    entries = [e for e in loaded.entries if picked(e.name, selection.only)]
    found = targets(loaded, entries, with_controls=not selection.no_controls)
    if selection.controls:
        found = [t for t in found if t.kind == "control" and t.name in selection.controls]
    if not found:
        raise UsageError("--sanitize: no CUDA entry or control selected (the sanitizer runs CUDA kernels only)")
    return found


def _gate_options(selection) -> bool:
    """Whether the selection names a gate, a case or a seed (the pass runs each smallest case at the contract's)."""
    return any(value is not None for value in (selection.gate, selection.case, selection.seed))


def sanitize_session(session, found: list[Target], jobs, json_path: str | None,
                     say: Callable[[str], None], report: Callable[[Finding], None]) -> Sanitized:
    """Check the machine, run every target under every tool (`report` hears each finding), judge, write the JSON."""
    loaded = session.loaded
    session.machine(cuda=True, gpu=True, outputs={"json": json_path}, names=[t.name for t in found], say=say)
    names = {t.name for t in found}
    planted = {c.name: c.sanitize for c in loaded.controls if c.sanitize and c.name in names}
    workers = usable_cores() if jobs == "auto" else int(jobs)
    findings = sanitize(session.path, found, TOOLS, workers, TIMEOUT, report)
    passed, line = verdict(findings, planted)
    if json_path:
        Path(json_path).write_text(json.dumps({"summary": line, "passed": passed,
                                               "findings": [asdict(f) for f in findings]}, indent=1) + "\n")
    return Sanitized(findings, passed, line)
