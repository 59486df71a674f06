"""Fresh virtual environments and pip in them, for the install tests: resolutions run side by side. The
environments are made without pip (ensurepip takes seconds each); this interpreter's pip runs in them through its
`--python` option, which starts pip under the environment's own interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import venv
from pathlib import Path


def fresh_venv(where: Path) -> Path:
    """A new virtual environment (no pip of its own: `pip` runs in it); its python."""
    venv.EnvBuilder(with_pip=False).create(where)
    return where / "bin" / "python"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _command(python: Path, args: tuple[str, ...]) -> list[str]:
    """pip run in that environment, by its interpreter."""
    return [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", *args]


def pip(python: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """pip in that environment, run to its end."""
    return subprocess.run(_command(python, args), capture_output=True, text=True, timeout=timeout, env=_env())


def pip_started(python: Path, *args: str) -> subprocess.Popen:
    """pip in that environment, started (its output piped)."""
    return subprocess.Popen(_command(python, args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), start_new_session=True)


def stop(started: subprocess.Popen) -> None:
    """End a started pip and the pip it runs in the environment (one process group), where a test ended before
    waiting for it."""
    if started.poll() is None:
        os.killpg(started.pid, signal.SIGKILL)
    started.communicate()


def resolving(python: Path, report: Path, *requirements: str) -> subprocess.Popen:
    """`pip install --dry-run` of the requirements, started: it writes what it would install to `report`."""
    return pip_started(python, "install", "--dry-run", "--quiet", "--report", str(report), *requirements)


def resolved(started: subprocess.Popen, report: Path, timeout: float = 900) -> dict[str, str] | str:
    """What a started resolution would install, {name: version}; or pip's output where it failed."""
    out, err = started.communicate(timeout=timeout)
    if started.returncode != 0:
        return out[-3000:] + err[-3000:]
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
