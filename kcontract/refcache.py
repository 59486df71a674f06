"""A content-addressed on-disk cache of float64 references and ranges.

A reference depends on the problem's inputs, the entry's spec and the family's numerics, never on the
kernel: its key hashes the input buffers and scalars, the spec, the gate and case, and the source of the
family's package and of kcontract's numerics. Each file carries the sha256 of its payload; a file that
fails it, or does not load, is rebuilt, never trusted. Workers computing the same key wait for each other.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import pickle
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np

from kcontract.problem import Checked, Problem, Reference
from kcontract.profiling import note_cache
from kcontract.toolchain.cache import default_root

MAGIC = b"kcontract-reference-1\n"
NUMERICS = Path(__file__).resolve().parent / "numerics"
PROBLEM = Path(__file__).resolve().parent / "problem.py"


@lru_cache(maxsize=None)
def numerics_digest(family_file: str) -> str:
    """sha256 over the family package's sources and kcontract's numerics: any change invalidates references."""
    h = hashlib.sha256()
    files = sorted(Path(family_file).resolve().parent.rglob("*.py")) + sorted(NUMERICS.rglob("*.py")) + [PROBLEM]
    for path in files:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def fingerprint(problem: Problem) -> str:
    """sha256 over every input buffer (dtype, shape, bytes) and scalar of a problem."""
    h = hashlib.sha256()
    for name in sorted(problem.inputs):
        a = np.ascontiguousarray(problem.inputs[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}\0".encode())
        h.update(memoryview(a).cast("B"))
    for name in sorted(problem.scalars):
        value = problem.scalars[name]
        h.update(f"{name}:{np.asarray(value).dtype.str}:{np.asarray(value).tobytes().hex()}\0".encode())
    return h.hexdigest()


def reference_root(contract_path: str) -> Path:
    """Where references live: beside the compile cache ($KCONTRACT_CACHE or .kcontract-cache by the contract)."""
    return default_root(contract_path) / "references"


class ReferenceCache:
    """References by key under `root`; `enabled=False` computes every one (`--no-cache`)."""

    def __init__(self, root: Path | None, enabled: bool = True):
        self.root, self.enabled = root, enabled and root is not None

    def key(self, family, gate: int, checked: Checked) -> str:
        """Everything the reference depends on, hashed."""
        facts = {"family": family.name, "numerics": numerics_digest(inspect.getfile(type(family))),
                 "spec": family.spec.model_dump(mode="json"), "seed": family.seed, "gate": gate,
                 "case": checked.case, "label": checked.problem.label, "inputs": fingerprint(checked.problem)}
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()

    def reference(self, family, gate: int, checked: Checked) -> Reference:
        """The checked problem's reference: from the cache when a sound copy exists, else computed and stored."""
        if not self.enabled or isinstance(checked.reference, Reference):
            note_cache("off")
            return checked.compute_reference()
        key = self.key(family, gate, checked)
        path = self.root / key[:2] / f"{key}.ref"
        found = self._load(path)
        if found is not None:
            note_cache("hit")
            return found
        with self._lock(path):
            found = self._load(path)  # another worker may have computed it while we waited
            if found is not None:
                note_cache("hit")
                return found
            reference = checked.compute_reference()
            self._store(path, reference)
        note_cache("miss")
        return reference

    def _load(self, path: Path) -> Reference | None:
        """The stored reference, or None when absent; a corrupt file is removed and reported as rebuilt."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        head, _, rest = data.partition(b"\n")
        digest, _, payload = rest.partition(b"\n")
        try:
            if head + b"\n" != MAGIC or hashlib.sha256(payload).hexdigest().encode() != digest:
                raise ValueError("checksum")
            found = pickle.loads(payload)
            if not isinstance(found, Reference):
                raise ValueError("type")
            return found
        except Exception:  # a torn, edited or foreign file: drop it and compute again
            note_cache("rebuilt")
            path.unlink(missing_ok=True)
            return None

    def _store(self, path: Path, reference: Reference) -> None:
        """Write atomically: a reader sees a whole file or none."""
        payload = pickle.dumps(reference, protocol=5)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(tmp, path)

    @contextmanager
    def _lock(self, path: Path):
        """Hold an exclusive lock on the key while computing it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
