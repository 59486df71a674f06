"""`python -m tests.helpers.drift_peak TARGET TOKENS BATCHES/SLOTS ...`: for each run of `kcontract drift`'s
measurement, the bytes it added to this process's peak resident memory (VmHWM, reset before it, less VmRSS then),
a line each, after a small run that pays torch's first-call costs; `measured_peaks` runs it in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def measured_peaks(target: str, tokens: int, runs: list[tuple[str, str]]) -> list[int]:
    """The peak bytes of each (batches, slots) run in one fresh process: malloc's mmap threshold low, so each large
    tensor is its own mapping and a freed one leaves the resident set; one torch thread (memory, not speed)."""
    done = subprocess.run([sys.executable, "-m", "tests.helpers.drift_peak", target, str(tokens),
                           *[f"{batches}/{slots}" for batches, slots in runs]], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20), "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    return [int(line) for line in done.stdout.split()]


def status(field: str) -> int:
    """A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def main() -> None:
    from kcontract.drift.run import measure
    from kcontract.drift.target import build

    spec, tokens, runs = sys.argv[1], int(sys.argv[2]), [run.split("/") for run in sys.argv[3:]]
    target = build(spec, None, None, 0)
    measure(target, 1, [2], ["first"], 0)
    for batches, slots in runs:
        Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from the resident set now
        before = status("VmRSS")
        measure(target, tokens, [int(b) for b in batches.split(",")], slots.split(","), 0)
        print(status("VmHWM") - before, flush=True)


if __name__ == "__main__":
    main()
