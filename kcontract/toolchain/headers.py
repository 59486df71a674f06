"""The local headers a CUDA source includes (transitively), so their bytes join its cache key."""

from __future__ import annotations

import re
from pathlib import Path

from kcontract.contract.paths import option_paths

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def include_dirs_of(options: tuple[str, ...] | list[str], base: Path) -> list[Path]:
    """Directories named by -I/--include-path options, relative ones taken from `base` (the contract's folder, whose
    loader has kept them inside the folders it may read)."""
    return [(base / value).resolve() for _, kind, value in option_paths(options) if kind == "folder"]


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
