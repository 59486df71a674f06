"""What one receipt row depends on: its own YAML node, the seed, the files its kernel is built or imported from,
and the checker (kcontract's core and the row's family) that judged it.

A row never depends on the whole contract file: an entry's node is its mapping under `entries` with a named
kernel replaced by that kernel's mapping (its `description` and `coverage` floor left out: no gate reads them); a
control's node is its own mapping, its kernel resolved the same way, and its entry's node, since a control runs
its entry's cases. Files are named relative to the contract's folder (`../doubles/x.py` where the project root lies
above it).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import kcontract
from kcontract.contract.imports import import_roots
from kcontract.contract.model import KernelRef
from kcontract.contract.paths import resolve_source
from kcontract.identity import PACKAGE, below, core_digest, family_digest, file_sha256, installed_roots, module_files
from kcontract.toolchain.headers import include_dirs_of, local_headers

PROSE = ("description", "coverage", "mutation")  # fields no gate reads: prose, coverage's floor, argued mutants


def digest_of(value) -> str:
    """sha256 of a value's canonical JSON (mappings sorted, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _resolved(raw: dict, kernels: dict) -> dict:
    """A node without prose, a named kernel replaced by its mapping under `kernels`."""
    node = {k: v for k, v in raw.items() if k not in PROSE}
    if isinstance(node.get("kernel"), str):
        node["kernel"] = kernels.get(node["kernel"], node["kernel"])
    return node


def node_in(raw: dict, kind: str, name: str) -> dict | None:
    """A row's node in a parsed contract (None where it has no such entry or control): an entry's own mapping, a
    control's with its entry's node beside it; named kernels resolved."""
    kernels = raw.get("kernels") if isinstance(raw.get("kernels"), dict) else {}
    listed = raw.get("entries" if kind == "entry" else "controls")
    found = next((n for n in listed if isinstance(n, dict) and n.get("name") == name), None) \
        if isinstance(listed, list) else None
    if found is None:
        return None
    node = _resolved(found, kernels)
    if kind == "control":
        node["entry_node"] = node_in(raw, "entry", found.get("entry"))
    return node


def kernel_files(loaded, kernel: KernelRef) -> list[Path]:
    """The files a kernel is built or imported from: a CUDA source, the local headers it includes and its patch;
    a Python kernel's module and every project module it imports (not kcontract, not installed packages)."""
    base = Path(loaded.path).resolve().parent
    if kernel.compiled is not None:
        source = resolve_source(base, kernel.compiled.source).resolve()
        files = [source, *local_headers(source, include_dirs_of(kernel.compiled.options, base))]
        if kernel.compiled.patch:
            files.append(resolve_source(base, kernel.compiled.patch).resolve())
        return files
    root = import_roots(loaded.path)[-1]
    installed = installed_roots()

    def project(path: Path) -> bool:
        return below(path, root) and not below(path, PACKAGE) and not any(below(path, r) for r in installed)

    return module_files(kernel.python.partition(":")[0], project)


def relative(path: Path, base: Path) -> str:
    """`kernels/x.cu`, or `../doubles/x.py` for a file beside the contract's folder."""
    return Path(os.path.relpath(path, base)).as_posix()


def row_depends(loaded, kind: str, name: str) -> dict:
    """The row's dependencies as the contract and files stand now: node digest, seed, files with their sha256."""
    base = Path(loaded.path).resolve().parent
    subject = loaded.entry(name) if kind == "entry" else loaded.control(name)
    files = {relative(p, base): file_sha256(p) for p in kernel_files(loaded, subject.kernel) if p.is_file()}
    found = {"node": digest_of(node_in(loaded.raw, kind, name)), "seed": loaded.seed,
             "files": dict(sorted(files.items()))}
    if kind == "control":  # which of the two nodes changed, for the message
        found["entry_node"] = digest_of(node_in(loaded.raw, "entry", subject.entry))
    return found


def row_family(loaded, kind: str, name: str):
    """The family object that judges a row (a control's: its entry's)."""
    entry = loaded.entry(name if kind == "entry" else loaded.control(name).entry)
    return entry.family


def row_checker(loaded, kind: str, name: str) -> dict:
    """The checker that judges a row now: kcontract's version, its core's digest, the row's family and its digest."""
    family = type(row_family(loaded, kind, name))
    return {"version": kcontract.__version__, "core": core_digest(), "family": family.name,
            "family_sha256": family_digest(family)}
