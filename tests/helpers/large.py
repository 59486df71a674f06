"""A large contract: many small Python rmsnorm entries (tests/doubles/rmsnorm.py), so nothing compiles; and a
command's wall time and peak memory."""

from __future__ import annotations

import os
import shutil
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from tests.helpers.cli import SCRIPT

DOUBLES = Path(__file__).resolve().parents[1] / "doubles"
ENTRY = """\
  - name: rms_{i:04d}
    family: rmsnorm
    kernel: {{python: "kern.rmsnorm:rmsnorm"}}
    eps: 1.0e-6
    cases:
      - {{name: h{hidden}, hidden: {hidden}, rows: 2}}
"""
CONTROL = """\
controls:
  - {name: eps_after_sqrt, entry: rms_0000, gate: 1, fault: eps added after the square root,
     kernel: {python: "kern.rmsnorm:eps_after_sqrt"}}
"""


def many_entries(folder: Path, count: int) -> Path:
    """`folder`/large.yaml with `count` rmsnorm entries named rms_0000, rms_0001, ... and a control of the first,
    beside a package `kern` that holds the numpy RMSNorm double."""
    (folder / "kern").mkdir(exist_ok=True)
    (folder / "kern" / "__init__.py").write_text("")
    for name in ("decode.py", "rmsnorm.py"):
        shutil.copy(DOUBLES / name, folder / "kern" / name)
    path = folder / "large.yaml"
    entries = "".join(ENTRY.format(i=i, hidden=64 + 8 * (i % 16)) for i in range(count))
    path.write_text(f"version: 1\nseed: 5\nentries:\n{entries}{CONTROL}")
    return path


class Measured(NamedTuple):
    """A command's exit code, output, wall and CPU seconds (user and system, its workers' included) and peak memory
    in MB (the largest of it and its workers)."""

    code: int
    output: str
    wall: float
    cpu: float
    peak_mb: float


def measured(*args: str, cwd: Path, env: dict[str, str]) -> Measured:
    """Run the console script in `cwd` with `env` added, and measure it."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KCONTRACT_IN_PROCESS")} | env
    log = cwd / f".measured-{os.getpid()}.log"
    with open(log, "w") as out:
        started = time.monotonic()
        launcher = subprocess.run([sys.executable, "-c", LAUNCHER, str(SCRIPT), *args], cwd=cwd, env=environ,
                                  stdout=out, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - started
    code, cpu, peak_kb = json.loads(launcher.stderr.strip().splitlines()[-1])
    text = log.read_text()
    log.unlink()
    return Measured(code, text, wall, cpu, peak_kb / 1024)


# Started by a small process, so the command's peak memory is its own: a child execs with the high-water mark of the
# process it was forked from, and a test worker's is far above any command's.
LAUNCHER = """import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss]), file=sys.stderr)
"""
