"""The on-disk cache's size, and pruning it: least recently used items first, down to a cap.

Items are what is removed whole: a compile (one folder per cubin), a drawn input or reference (one file), a
mutation campaign (one folder per entry). A cache hit touches its item, so use, not creation, orders them.
The cap is $KCONTRACT_CACHE_MAX (e.g. `4GiB`, `500MB`; `0` or `off` for none), default 4 GiB; `run` and
`check` prune to it when they end, never removing what they used themselves (a run's own working set stays
warm for the next, however large).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.capacity import size_text

CAP_ENV = "KCONTRACT_CACHE_MAX"
DEFAULT_CAP = 4 << 30
_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1 << 10, "m": 1e6, "mb": 1e6, "mib": 1 << 20,
          "g": 1e9, "gb": 1e9, "gib": 1 << 30, "t": 1e12, "tb": 1e12, "tib": 1 << 40}


@dataclass(frozen=True)
class Item:
    """One removable piece of the cache."""

    path: Path
    kind: str  # "compile", "reference", "mutants"
    size: int
    used: float  # seconds since the epoch of its last use


def parse_size(text: str, what: str = CAP_ENV) -> int:
    """`4GiB`, `500MB`, `1.5g`, `1234` -> bytes; `off` -> 0."""
    value = text.strip().lower()
    if value in ("off", "none", "0"):
        return 0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value)
    if not m or m.group(2) not in _UNITS:
        raise UsageError(f"{what} {text!r}: expected a size such as 4GiB, 500MB or 0 (no cap)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def cap() -> int:
    """The size cap in bytes (0: none)."""
    return parse_size(os.environ[CAP_ENV]) if os.environ.get(CAP_ENV) else DEFAULT_CAP


def _tree(path: Path) -> tuple[int, float]:
    """Bytes and newest modification time of a file or folder (the files under it, not through linked folders)."""
    if path.is_file():
        st = path.stat()
        return st.st_size, st.st_mtime
    size, used = 0, 0.0
    folders = [path]
    while folders:
        try:
            entries = os.scandir(folders.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif entry.is_file():
                        st = entry.stat()
                        size += st.st_size
                        used = max(used, st.st_mtime)
                except OSError:
                    continue
    return size, used


def items(root: Path) -> list[Item]:
    """Every removable item under the cache root."""
    found: list[Item] = []
    if not root.is_dir():
        return found
    for top in sorted(root.iterdir()):
        if top.name == "references":
            for file in top.glob("*/*.bin"):
                size, used = _tree(file)
                found.append(Item(file, "reference", size, used))
        elif top.name == "mutants":
            for folder in (p for p in top.iterdir() if p.is_dir()):
                found.append(Item(folder, "mutants", *_tree(folder)))
        elif top.is_dir() and len(top.name) == 2:
            for folder in (p for p in top.iterdir() if p.is_dir()):
                found.append(Item(folder, "compile", *_tree(folder)))
    return found


def touch(path: Path) -> None:
    """Mark an item used now (a cache hit); a read-only cache is left as it is."""
    try:
        os.utime(path)
    except OSError:
        pass


def prune(root: Path, limit: int, older_than_s: float | None = None, keep_since: float | None = None) -> list[Item]:
    """Remove items unused for `older_than_s`, then the least recently used until the cache is under `limit`
    bytes (0: no limit), sparing items used at or after `keep_since`; the removed items."""
    now, removed = time.time(), []
    everything = sorted(items(root), key=lambda i: i.used)
    total = sum(i.size for i in everything)
    for item in everything:
        if keep_since is not None and item.used >= keep_since:
            continue
        stale = older_than_s is not None and now - item.used > older_than_s
        if not stale and (not limit or total <= limit):
            continue
        if item.path.is_dir():
            shutil.rmtree(item.path, ignore_errors=True)
        else:
            item.path.unlink(missing_ok=True)
            item.path.with_suffix(".lock").unlink(missing_ok=True)
        total -= item.size
        removed.append(item)
    return removed


def keep_under_cap(root: Path, started: float) -> str | None:
    """Prune to the cap when the cache is over it, sparing what was used since `started` (this command's own);
    a note of what went, or None."""
    limit = cap()
    if not limit:
        return None
    found = items(root)
    if sum(i.size for i in found) <= limit:
        return None
    removed = prune(root, limit, keep_since=started - 1.0)  # mtimes may round down
    if not removed:
        return None
    return (f"the cache {root} was over its cap of {size_text(limit)} (${CAP_ENV}): removed the "
            f"{len(removed)} least recently used items this command did not use")
