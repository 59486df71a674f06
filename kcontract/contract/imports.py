"""Where Python kernels and families import from: the contract's folder and its project root, as pytest does; and
a kernel source imported from its (patched) text."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def import_roots(contract_path: str | Path) -> list[Path]:
    """The contract file's folder, then the nearest folder at or above it that holds a project marker."""
    folder = Path(contract_path).resolve().parent
    roots = [folder]
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            if candidate != folder:
                roots.append(candidate)
            break
    return roots


def add_import_roots(contract_path: str | Path) -> None:
    """Put the contract's import roots at the front of sys.path (once each), so `module:function` resolves."""
    for root in reversed(import_roots(contract_path)):
        text = str(root)
        if text in sys.path:
            sys.path.remove(text)
        sys.path.insert(0, text)


def import_text(source: bytes, path: Path, scratch: Path, name: str):
    """`source` (a kernel file's text, a patch applied) imported as module `name` from a file of `path`'s name in
    `scratch`, `path`'s folder on sys.path for the modules beside it."""
    copy = scratch / path.name
    copy.write_bytes(source)
    spec = importlib.util.spec_from_file_location(name, copy)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module
