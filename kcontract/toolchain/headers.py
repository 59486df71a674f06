"""The local headers a CUDA source includes (transitively), so their bytes join its cache key."""

from __future__ import annotations

import re
from pathlib import Path

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def include_dirs_of(options: tuple[str, ...] | list[str], base: Path) -> list[Path]:
    """Directories named by -I/--include-path options, relative ones taken from `base`."""
    dirs = []
    items = list(options)
    for i, option in enumerate(items):
        value = None
        for prefix in ("--include-path=", "-I"):
            if option.startswith(prefix):
                value = option[len(prefix):] or (items[i + 1] if i + 1 < len(items) else None)
        if option == "--include-path" and i + 1 < len(items):
            value = items[i + 1]
        if value:
            dirs.append((base / value).resolve())
    return dirs


def local_headers(source: Path, include_dirs: list[Path]) -> list[Path]:
    """Every header reachable by #include from `source` that exists beside it or in `include_dirs`, sorted."""
    found: dict[Path, None] = {}
    todo = [source.resolve()]
    seen = {todo[0]}
    while todo:
        current = todo.pop()
        try:
            text = current.read_bytes()
        except OSError:
            continue
        for quote, name in _INCLUDE.findall(text):
            name = name.decode("utf-8", "replace").strip()
            places = ([current.parent] if quote == b'"' else []) + include_dirs
            for place in places:
                candidate = (place / name).resolve()
                if candidate.is_file():
                    if candidate not in seen:
                        seen.add(candidate)
                        found[candidate] = None
                        todo.append(candidate)
                    break
    return sorted(found)
