"""What a run depended on: every source file it read, the checker's core and families, and the git state."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import kcontract
from kcontract.identity import below, core_digest, core_files, family_digest, family_files, module_files
from kcontract.toolchain.headers import include_dirs_of, local_headers
from kcontract.contract.paths import resolve_source

COMMIT_ENV, DIRTY_ENV = "KCONTRACT_GIT_COMMIT", "KCONTRACT_GIT_DIRTY"  # where the tree travelled without .git


def checker(loaded) -> dict:
    """The checker's identity for a run: kcontract's version, its core's digest, and each family's module set."""
    families = {type(e.family).name: family_digest(type(e.family)) for e in loaded.entries}
    return {"version": kcontract.__version__, "sha256": core_digest(), "families": dict(sorted(families.items()))}


def run_sources(loaded) -> list[str]:
    """Every file under the contract's folder the run depended on, relative to it, sorted: the contract, kernel
    sources, headers and patches, Python kernels, and the checker's core and families where they lie there."""
    base = Path(loaded.path).resolve().parent
    files: list[Path] = [Path(loaded.path).resolve()]
    kernels = [e.kernel for e in loaded.entries] + [c.kernel for c in loaded.controls]
    seen: set[Path] = set()
    for kernel in kernels:
        if kernel.cuda is not None:
            source = resolve_source(base, kernel.cuda.source).resolve()
            files += [source, *local_headers(source, include_dirs_of(kernel.cuda.options, base))]
            if kernel.cuda.patch:
                files.append(resolve_source(base, kernel.cuda.patch).resolve())
        else:
            files += module_files(kernel.python.partition(":")[0], base, seen)
    for cls in {type(entry.family) for entry in loaded.entries}:
        files += family_files(cls)
    files += core_files()
    return sorted({str(p.relative_to(base)) for p in files if below(p, base) and p.is_file()})


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
