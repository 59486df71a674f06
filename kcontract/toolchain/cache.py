"""A content-addressed compile cache: one directory per (source, headers, names, SM, options, toolchain)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kcontract.atomicfile import write_atomic
from kcontract.cachesize import touch
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


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def compile_key(*, toolchain: str, label: str, source: bytes, headers: dict[str, bytes], names: tuple[str, ...],
                sm: str, options: tuple[str, ...], exports: tuple[str, ...] = ()) -> str:
    """The cache key of one compile: sha256 over everything that can change the cubin (a unit that exports nothing
    keeps the key it had before units could export)."""
    facts = {
        "toolchain": toolchain,
        "label": label,
        "source": sha256_bytes(source),
        "headers": {name: sha256_bytes(data) for name, data in sorted(headers.items())},
        "names": sorted(names),
        "sm": sm,
        "options": list(options),
    }
    if exports:
        facts["exports"] = sorted(exports)
    return sha256_bytes(json.dumps(facts, sort_keys=True).encode())


def inputs_digest(source: bytes, headers: dict[str, bytes], options: tuple[str, ...]) -> str:
    """sha256 over a kernel's source, its local headers and its options: what a launch record depends on."""
    facts = {"source": sha256_bytes(source), "options": list(options),
             "headers": {name: sha256_bytes(data) for name, data in sorted(headers.items())}}
    return sha256_bytes(json.dumps(facts, sort_keys=True).encode())


@dataclass(frozen=True)
class CachedModule:
    """A cached compile: the cubin on disk, mangled names, and the NVRTC log."""

    key: str
    cubin_path: Path
    lowered: dict[str, str]
    log: str


class CompileCache:
    """Cubins, their metadata and derived text (SASS) under `root/<key[:2]>/<key>/`."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> CachedModule | None:
        """The cached compile for `key`, or None."""
        where = self._dir(key)
        try:
            meta = json.loads((where / "meta.json").read_text())
        except (OSError, ValueError):
            return None
        cubin = where / "module.cubin"
        if not cubin.is_file():
            return None
        touch(where / "meta.json")
        return CachedModule(key, cubin, meta["lowered"], meta["log"])

    def put(self, key: str, cubin: bytes, lowered: dict[str, str], log: str, facts: dict) -> CachedModule:
        """Store a compile atomically and return it."""
        where = self._dir(key)
        where.mkdir(parents=True, exist_ok=True)
        write_atomic(where / "module.cubin", cubin)
        meta = {"lowered": lowered, "log": log, "facts": facts}
        write_atomic(where / "meta.json", json.dumps(meta, indent=1, sort_keys=True).encode())
        return CachedModule(key, where / "module.cubin", lowered, log)

    def text(self, key: str, name: str) -> str | None:
        """Derived text stored beside a compile (e.g. `sass.txt`), or None."""
        try:
            return (self._dir(key) / name).read_text()
        except OSError:
            return None

    def put_text(self, key: str, name: str, text: str) -> None:
        """Store derived text beside a compile."""
        where = self._dir(key)
        where.mkdir(parents=True, exist_ok=True)
        write_atomic(where / name, text.encode())


