"""Fresh virtual environments and pip in them, for the install tests: resolutions run side by side."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path


def fresh_venv(where: Path) -> Path:
    """A new virtual environment with pip; its python."""
    venv.EnvBuilder(with_pip=True).create(where)
    return where / "bin" / "python"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def pip(python: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """pip of that environment, run to its end."""
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                          text=True, timeout=timeout, env=_env())


def pip_started(python: Path, *args: str) -> subprocess.Popen:
    """pip of that environment, started (its output piped)."""
    return subprocess.Popen([str(python), "-m", "pip", "--disable-pip-version-check", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())


def resolving(python: Path, report: Path, *requirements: str) -> subprocess.Popen:
    """`pip install --dry-run` of the requirements, started: it writes what it would install to `report`."""
    return pip_started(python, "install", "--dry-run", "--quiet", "--report", str(report), *requirements)


def resolved(started: subprocess.Popen, report: Path, timeout: float = 900) -> dict[str, str] | str:
    """What a started resolution would install, {name: version}; or pip's output where it failed."""
    out, err = started.communicate(timeout=timeout)
    if started.returncode != 0:
        return out[-3000:] + err[-3000:]
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
