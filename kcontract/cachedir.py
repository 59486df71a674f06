"""Where kcontract's caches live (compiled kernels, references, mutants): one folder per contract, found the same
way by the parent, its workers and every command."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

from kcontract.errors import EnvironmentProblem

CACHE_DIR = ".kcontract-cache"
CACHE_ENV = "KCONTRACT_CACHE"  # overrides where the cache lives


def default_root(contract_path: str | Path) -> Path:
    """$KCONTRACT_CACHE, else .kcontract-cache beside the contract file."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(contract_path).resolve().parent / CACHE_DIR


def user_root(contract_path: str | Path) -> Path:
    """A per-user cache for a contract whose own folder is read-only: $XDG_CACHE_HOME/kcontract/<folder digest>."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = str(Path(contract_path).resolve().parent)
    return home / "kcontract" / hashlib.sha256(folder.encode()).hexdigest()[:16]


def writable(folder: Path) -> str | None:
    """None when files can be created in `folder` (made if absent), else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as error:
        return error.strerror or str(error)
    return None


def resolve_root(contract_path: str | Path) -> tuple[Path, str | None]:
    """The cache folder to use and a note when it is not the default: the default when it can be written, else a
    per-user folder ($KCONTRACT_CACHE, when set, is used as it is or refused)."""
    return _resolve(str(Path(contract_path).resolve()), os.environ.get(CACHE_ENV), os.environ.get("XDG_CACHE_HOME"))


@functools.cache
def _resolve(contract_path: str, override: str | None, xdg: str | None) -> tuple[Path, str | None]:
    """`resolve_root` once per contract and environment."""
    first = default_root(contract_path)
    why = writable(first)
    if why is None:
        return first, None
    if os.environ.get(CACHE_ENV):
        raise EnvironmentProblem(f"{CACHE_ENV}={first}: cannot write there ({why}); point it at a writable folder")
    fallback = user_root(contract_path)
    why_not = writable(fallback)
    if why_not is not None:
        raise EnvironmentProblem(f"no cache folder can be written: {first} ({why}), {fallback} ({why_not}); set "
                                 f"{CACHE_ENV} to a writable folder")
    return fallback, f"{first} is not writable ({why}): caching in {fallback} instead"


def cache_root(contract_path: str | Path) -> Path:
    """The compile and reference cache's folder for a contract (see `resolve_root`)."""
    return resolve_root(contract_path)[0]
