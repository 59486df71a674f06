"""A content-addressed on-disk cache of what does not depend on the kernel: drawn inputs, references, ranges.

A reference's key hashes the problem's input buffers and scalars, the entry's spec, the gate and case, the
family's module set and kcontract's numerics; drawn inputs are keyed by those sources, the spec, the seed and
the family's own name for them. Each file carries the sha256 of its body; a file that
fails it, or does not load, is rebuilt, never trusted. Workers computing the same key wait for each other.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import pickle
import struct
import sys
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kcontract.atomicfile import atomic_writer
from kcontract.cachedir import cache_root
from kcontract.cachesize import touch
from kcontract.identity import digest, family_digest
from kcontract.problem import Assembled, Checked, Problem, Reference
from kcontract.profiling import note_cache

MAGIC = b"kcontract-cache-2\n"
NUMERICS = Path(__file__).resolve().parent / "numerics"
PROBLEM = Path(__file__).resolve().parent / "problem.py"
LENGTH = struct.Struct("<Q")


@lru_cache(maxsize=None)
def numerics_digest() -> str:
    """sha256 over kcontract's numerics and problem objects: what every family's references are built from."""
    return digest(sorted(NUMERICS.rglob("*.py")) + [PROBLEM], NUMERICS.parent)


def fingerprint(problem: Problem) -> str:
    """sha256 over every input buffer (dtype, shape, bytes; Assembled blocks and fill) and scalar of a problem."""
    h = hashlib.sha256()
    for name in sorted(problem.inputs):
        value = problem.inputs[name]
        if isinstance(value, Assembled):
            h.update(f"{name}:assembled:{np.dtype(value.dtype).str}:{value.shape}:{value.fill}\0".encode())
            for first, rows, data in value.blocks:
                where = (rows.start, rows.stop) if isinstance(rows, slice) else np.asarray(rows).tobytes().hex()
                h.update(f"{first}:{where}\0".encode())
                _update(h, data)
        else:
            h.update(f"{name}:".encode())
            _update(h, value)
    for name in sorted(problem.scalars):
        value = np.asarray(problem.scalars[name])
        h.update(f"{name}:{value.dtype.str}:{value.tobytes().hex()}\0".encode())
    return h.hexdigest()


def _update(h, array) -> None:
    """Hash an array's dtype, shape and bytes."""
    a = np.ascontiguousarray(array)
    h.update(f"{a.dtype.str}:{a.shape}\0".encode())
    h.update(memoryview(a).cast("B"))


def reference_root(contract_path: str) -> Path:
    """Where the cache lives: beside the compile cache ($KCONTRACT_CACHE or .kcontract-cache by the contract)."""
    return cache_root(contract_path) / "references"


def holds_any(root: Path) -> bool:
    """Whether the cache under `root` holds a stored input or reference (a run that finds none computes all)."""
    return next(root.glob("*/*.bin"), None) is not None


def _digest(facts: dict) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _family_facts(family) -> dict:
    """What every key of a family holds: its name and module set, the core numerics, the entry (families draw per
    entry name), its spec, the kernel's exported constants and the seed."""
    return {"family": family.name, "module_set": family_digest(type(family)), "numerics": numerics_digest(),
            "entry": family.entry, "spec": family.spec.model_dump(mode="json"), "exports": family.exports,
            "seed": family.seed}


class ReferenceCache:
    """Cached objects under `root`; `enabled=False` computes every one (`--no-cache`)."""

    def __init__(self, root: Path | None, enabled: bool = True):
        self.root, self.enabled = root, enabled and root is not None

    def reference(self, family, gate: int, checked: Checked) -> Reference:
        """The checked problem's reference: from the cache when a sound copy exists, else computed and stored."""
        if not self.enabled or isinstance(checked.reference, Reference):
            note_cache("off", "references")
            return checked.compute_reference()
        key = _digest({**_family_facts(family), "gate": gate, "case": checked.case, "label": checked.problem.label,
                       "inputs": fingerprint(checked.problem)})
        return self._fetch(key, checked.compute_reference, "references")

    def memo(self, family, parts: tuple, make: Callable[[], Any]) -> Any:
        """A family's drawn inputs named by `parts` (e.g. ("rows", case)): from the cache, or made and stored."""
        if not self.enabled:
            note_cache("off", "inputs")
            return make()
        return self._fetch(_digest({**_family_facts(family), "parts": list(parts)}), make, "inputs")

    def _fetch(self, key: str, make: Callable[[], Any], what: str) -> Any:
        path = self.root / key[:2] / f"{key}.bin"
        found = self._load(path, what)
        if found is not None:
            note_cache("hit", what)
            return found
        with self._lock(path):
            found = self._load(path, what)  # another worker may have made it while we waited
            if found is not None:
                note_cache("hit", what)
                return found
            value = make()
            self._store(path, value)
        note_cache("miss", what)
        return value

    def _load(self, path: Path, what: str):
        """The stored object, or None when absent; a corrupt file is removed and counted as rebuilt."""
        try:
            data = memoryview(path.read_bytes())
        except OSError:
            return None
        touch(path)
        try:
            if bytes(data[:len(MAGIC)]) != MAGIC:
                raise ValueError("not a cache file")
            digest, body = bytes(data[len(MAGIC):len(MAGIC) + 64]), data[len(MAGIC) + 65:]
            if hashlib.sha256(body).hexdigest().encode() != digest:
                raise ValueError("checksum")
            parts, at = [], 0
            while at < len(body):
                (size,) = LENGTH.unpack_from(body, at)
                parts.append(body[at + LENGTH.size:at + LENGTH.size + size])
                at += LENGTH.size + size
            if at != len(body) or not parts:
                raise ValueError("truncated")
            return pickle.loads(parts[0], buffers=parts[1:])
        except Exception as error:  # a torn, edited or foreign file: drop it, say so, and make it again
            note_cache("rebuilt", what)
            path.unlink(missing_ok=True)
            print(f"note: cached {what} in {path} were damaged ({error or type(error).__name__}); removed and made "
                  f"again", file=sys.stderr, flush=True)
            return None

    def _store(self, path: Path, value: Any) -> None:
        """Write atomically (a reader sees a whole file or none); arrays go out of band, uncopied."""
        buffers: list[pickle.PickleBuffer] = []
        parts = [memoryview(pickle.dumps(value, protocol=5, buffer_callback=buffers.append))]
        parts += [b.raw() for b in buffers]
        h = hashlib.sha256()
        for part in parts:
            h.update(LENGTH.pack(part.nbytes))
            h.update(part)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(path) as f:
            f.write(MAGIC + h.hexdigest().encode() + b"\n")
            for part in parts:
                f.write(LENGTH.pack(part.nbytes))
                f.write(part)

    @contextmanager
    def _lock(self, path: Path):
        """Hold an exclusive lock on the key while making it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
