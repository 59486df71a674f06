"""Paths a contract names (kernel sources, patches, folders): relative to the contract file's folder."""

from __future__ import annotations

from pathlib import Path


def resolve_source(base: Path, label: str) -> Path:
    """A path from the contract, relative to the contract file's directory."""
    path = Path(label)
    return path if path.is_absolute() else (base / path)
