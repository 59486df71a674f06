"""Where a run's files came from: the git state of the work tree (or what a copy without .git was told)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


COMMIT_ENV, DIRTY_ENV = "KCONTRACT_GIT_COMMIT", "KCONTRACT_GIT_DIRTY"  # where the tree travelled without .git


def git_state(folder: Path) -> dict:
    """{"commit": sha or None, "dirty": bool or None} of the work tree holding `folder`."""
    if os.environ.get(COMMIT_ENV):
        return {"commit": os.environ[COMMIT_ENV], "dirty": os.environ.get(DIRTY_ENV, "") == "1"}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}
