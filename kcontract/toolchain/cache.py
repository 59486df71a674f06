"""A content-addressed compile cache: one directory per (source, headers, names, SM, options, toolchain), in the
folder kcontract.cachedir finds."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from kcontract.atomicfile import write_atomic
from kcontract.cachesize import touch


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

    def adopt(self, key: str, other: CompileCache) -> None:
        """Take `other`'s compile under `key` in place of this cache's, and drop the text derived from the old one."""
        where = self._dir(key)
        if where.is_dir():
            for derived in where.iterdir():
                if derived.name not in ("module.cubin", "meta.json"):
                    derived.unlink()
        where.mkdir(parents=True, exist_ok=True)
        write_atomic(where / "module.cubin", (other._dir(key) / "module.cubin").read_bytes())
        write_atomic(where / "meta.json", (other._dir(key) / "meta.json").read_bytes())

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


