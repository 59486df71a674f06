#!/usr/bin/env python3
"""The CPU contract's cold wall time on 2 workers (or any contract's, warm too), with where the time went.

Runs `kcontract run` on tests/contracts/cpu.yaml (or --contract) with an empty cache folder of its own, so every
input and float64 reference is made afresh, and prints the wall time, the seconds its tasks spent per stage
(summed over every gate of every entry and control), the heaviest tasks, and the SUMMARY line; with --warm, a
second run on the cache the first filled. Exit status: the runs' worst.

    python tools/cpu_contract_time.py [--contract FILE] [--jobs N|auto] [--top K] [--warm] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's kcontract, as the runs it times use (PYTHONPATH below)
from kcontract.profiling import SPLIT  # noqa: E402


def run_once(contract: str, jobs: str, folder: Path, name: str) -> tuple[float, subprocess.CompletedProcess, dict]:
    """Wall seconds of one run on the cache under `folder`, its process, and its JSON report."""
    report = folder / f"{name}.json"
    env = {**os.environ, "KCONTRACT_CACHE": str(folder / "cache"), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "kcontract", "run", "--contract", contract, "--jobs", jobs, "--json", str(report)]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - began
    return wall, done, json.loads(report.read_text()) if report.is_file() else {}


def gate_rows(document: dict) -> list[tuple[str, int, float, dict]]:
    """(task, gate, seconds, profile) of every gate that ran."""
    return [(("control " if kind == "controls" else "") + outcome["task"]["name"], int(gate), result["seconds"],
             result.get("profile") or {})
            for kind in ("entries", "controls") for outcome in document.get(kind, [])
            for gate, result in outcome["gates"].items()]


def show(label: str, wall: float, document: dict, jobs: str, top: int) -> None:
    """Wall time, task seconds per stage, the time outside the tasks and the heaviest gates of one run."""
    rows = gate_rows(document)
    staged = {stage: document["stages"][f"{stage}_s"] for stage in SPLIT}  # the run's own sums over its gates
    busy = sum(seconds for _, _, seconds, _ in rows)
    workers = int(jobs) if jobs.isdigit() else os.cpu_count() or 1
    print(f"{label} on {jobs} jobs ({os.cpu_count()} cores here): {wall:.1f} s wall")
    print(f"task seconds {busy:.1f}: " + ", ".join(f"{stage} {s:.1f}" for stage, s in staged.items()))
    print(f"outside the tasks (start, load, plan, workers, report): {max(0.0, wall - busy / workers):.1f} s "
          f"of wall beyond task seconds / jobs")
    for task, gate, seconds, profile in sorted(rows, key=lambda row: -row[2])[:top]:
        split = ", ".join(f"{stage} {profile.get(f'{stage}_s', 0.0):.1f}" for stage in SPLIT)
        print(f"  {task} gate {gate}: {seconds:.1f} s ({split})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contract", default="tests/contracts/cpu.yaml")
    parser.add_argument("--jobs", default="2", help="workers, or 'auto'")
    parser.add_argument("--top", type=int, default=8, help="the heaviest gates shown")
    parser.add_argument("--warm", action="store_true", help="run again on the cache the cold run filled")
    parser.add_argument("--json", help="keep the cold run's JSON report here (to compare two runs' verdicts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kcontract-cold-") as folder:
        runs = [("cold", *run_once(args.contract, args.jobs, Path(folder), "cold"))]
        if args.warm and runs[0][3]:
            runs.append(("warm", *run_once(args.contract, args.jobs, Path(folder), "warm")))
    if args.json and runs[0][3]:
        Path(args.json).write_text(json.dumps(runs[0][3], indent=1, sort_keys=True) + "\n")
    for label, wall, done, document in runs:
        if not document:
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            return done.returncode or 1
        show(f"{args.contract} {label}", wall, document, args.jobs, args.top)
    print(runs[-1][3]["summary"])
    return max(done.returncode for _, _, done, _ in runs)


if __name__ == "__main__":
    sys.exit(main())
