"""The installed `kcontract` console script as a user runs it: no PYTHONPATH, 80 columns, no terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("kcontract")


def kcontract(*args: str, cwd: Path = ROOT, timeout: float = 600, env: dict | None = None
              ) -> subprocess.CompletedProcess:
    """Run the installed console script without PYTHONPATH, at 80 columns, with no terminal."""
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: install the package first (pip install -e '.[dev]')"
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KCONTRACT_IN_PROCESS")}
    environ |= {"COLUMNS": "80"} | (env or {})
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=timeout)


def kcontract_here(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """What `kcontract(*args)` gives, from the console script's entry point run in this process (cwd the
    repository's): the same code, output and exit code without a new interpreter's start-up and imports, for
    commands that run no workers and whose point is their output (drift, whose torch import is seconds)."""
    from click.testing import CliRunner

    from kcontract.cli import main

    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    argv, cwd, code = sys.argv, Path.cwd(), 0
    with CliRunner().isolation(env={"COLUMNS": "80", **(env or {})}) as (stdout, stderr, _):
        sys.argv = ["kcontract", *args]
        os.chdir(ROOT)
        try:
            main()
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else int(done.code is not None)
        finally:
            sys.argv = argv
            os.chdir(cwd)
            for number, handler in handlers.items():
                signal.signal(number, handler)
        sys.stdout.flush()
        sys.stderr.flush()
        return subprocess.CompletedProcess(["kcontract", *args], code, stdout.getvalue().decode(),
                                           stderr.getvalue().decode())


def kcontract_in_process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`kcontract_here` with the run's tasks in this process too (KCONTRACT_IN_PROCESS=1): for runs whose point is
    what the gates find, not the console script's or its workers' processes (tests/test_installed.py holds those),
    without a new interpreter's start-up and imports for the command and each worker."""
    return kcontract_here(*args, env={"KCONTRACT_IN_PROCESS": "1", **(env or {})})


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]


def warm_bytecode() -> None:
    """kcontract's modules compiled into this test run's bytecode folder, so that a timed command pays no compile."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "kcontract")], check=True,
                   capture_output=True, timeout=300)
