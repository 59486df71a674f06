"""`kcontract run --sanitize`: each CUDA entry's smallest case, and its controls' kernels on it, under
compute-sanitizer's memcheck, racecheck, initcheck and synccheck, each launch in its own process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kcontract.errors import EnvironmentProblem
from kcontract.family.cases import main_cases
from kcontract.gatetable import gate

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
SANITIZER_ENV = "KCONTRACT_SANITIZER"  # the compute-sanitizer to use, where it is not on PATH
SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
PADDING_BYTES = 65536  # memcheck's guard after each allocation, so a read past an array's end lands in none
RACES = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?")


@dataclass
class Target:
    """A kernel to sanitize: an entry's, or a control's standing in for its entry, on one case."""

    kind: str  # "entry" or "control"
    name: str
    entry: str
    case: str


@dataclass
class Finding:
    """One target under one tool."""

    target: Target
    tool: str
    status: str  # "clean", "errors", "failed" (the launch itself failed), "timed out"
    errors: int = 0
    detail: str = ""  # the first reports, or why it failed
    seconds: float = 0.0


def sanitizer_path() -> str:
    """compute-sanitizer from $KCONTRACT_SANITIZER, PATH or the CUDA toolkit; an environment problem if absent."""
    for candidate in (os.environ.get(SANITIZER_ENV), shutil.which("compute-sanitizer"),
                      "/usr/local/cuda/bin/compute-sanitizer"):
        if candidate and Path(candidate).is_file():
            return candidate
    raise EnvironmentProblem("compute-sanitizer not found: install the CUDA toolkit (it ships in "
                             "/usr/local/cuda/bin) or set KCONTRACT_SANITIZER to its path")


def smallest_case(entry) -> str:
    """The entry's gate-1 case with the fewest host bytes."""
    family = entry.family
    return min(main_cases(family), key=family.case_bytes)


def targets(loaded, entries, with_controls: bool) -> list[Target]:
    """Every selected CUDA entry on its smallest case, then its CUDA controls on the same case."""
    found = []
    for entry in entries:
        if entry.kernel.compiled is None:
            continue
        case = smallest_case(entry)
        found.append(Target("entry", entry.name, entry.name, case))
        if with_controls:
            found += [Target("control", c.name, entry.name, case) for c in loaded.controls
                      if c.entry == entry.name and c.kernel.compiled is not None and gate(c.gate).launches]
    return found


def command(sanitizer: str, tool: str, contract: str, target: Target) -> list[str]:
    """The sanitized child process; memcheck puts a guard after every allocation (the child allocates each array
    on its own), so a read past an array's end is an error even where the next array would begin."""
    padding = ["--padding", str(PADDING_BYTES)] if tool == "memcheck" else []
    return [sanitizer, "--tool", tool, *padding, "--error-exitcode", "99", "--print-limit", "10",
            sys.executable, "-m", "kcontract.sanitizer.child", contract, target.kind, target.name, target.case]


def parse(tool: str, code: int, output: str) -> tuple[str, int, str]:
    """(status, errors, detail) from the sanitizer's exit code and output."""
    counts = [int(n) for n in (RACES if tool == "racecheck" else SUMMARY).findall(output)]
    counts += [int(n) for n in SUMMARY.findall(output)] if tool == "racecheck" else []
    errors = max(counts, default=0)
    reports = [line.strip("= ").strip() for line in output.splitlines()
               if line.startswith("=========") and ("Error" in line or "Hazard" in line or "hazard" in line)]
    if errors or code == 99:
        return "errors", max(errors, 1), "; ".join(reports[:3])[:400]
    if code != 0:
        tail = [line for line in output.splitlines() if line.strip()][-3:]
        return "failed", 0, f"exit code {code}: " + " | ".join(tail)[:400]
    if not SUMMARY.search(output) and not RACES.search(output):
        return "failed", 0, "the sanitizer printed no summary"
    return "clean", 0, ""


def run_one(sanitizer: str, tool: str, contract: str, target: Target, timeout: float) -> Finding:
    """Run one target under one tool."""
    started = time.monotonic()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        proc = subprocess.run(command(sanitizer, tool, contract, target), capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Finding(target, tool, "timed out", detail=f"no end within {timeout:g} s",
                       seconds=time.monotonic() - started)
    status, errors, detail = parse(tool, proc.returncode, proc.stdout + proc.stderr)
    return Finding(target, tool, status, errors, detail, time.monotonic() - started)


def sanitize(contract: str, found: list[Target], tools: tuple[str, ...], jobs: int, timeout: float,
             on_done=lambda finding: None) -> list[Finding]:
    """Every target under every tool, `jobs` processes at a time; findings in target then tool order."""
    sanitizer = sanitizer_path()
    work = [(target, tool) for target in found for tool in tools]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_one, sanitizer, tool, contract, target, timeout) for target, tool in work]
        findings = []
        for future in futures:
            findings.append(future.result())
            on_done(findings[-1])
    return findings


def verdict(findings: list[Finding], planted: dict[str, str]) -> tuple[bool, str]:
    """(passed, SANITIZE line): entries must be clean under every tool; controls are reported, and one a
    contract marks (`sanitize: TOOL`) must have errors under that tool."""
    entries = [f for f in findings if f.target.kind == "entry"]
    dirty = sorted({f.target.name for f in entries if f.status != "clean"})
    red = sorted({f.target.name for f in findings if f.target.kind == "control" and f.status == "errors"})
    missed = sorted(name for name, tool in planted.items()
                    if not any(f.target.name == name and f.tool == tool and f.status == "errors" for f in findings))
    names = len({f.target.name for f in entries})
    tools = sorted({f.tool for f in findings})
    line = (f"SANITIZE {names} kernels under {', '.join(tools)}: {names - len(dirty)} clean, {len(dirty)} not"
            f"{' (' + ', '.join(dirty) + ')' if dirty else ''}; controls with errors: {len(red)}"
            f"{' (' + ', '.join(red) + ')' if red else ''}; planted and missed: {len(missed)}"
            f"{' (' + ', '.join(missed) + ')' if missed else ''}")
    return not dirty and not missed, line
