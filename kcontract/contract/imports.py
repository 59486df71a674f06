"""Where Python kernels and families import from: the contract's folder and its project root, as pytest does."""

from __future__ import annotations

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
