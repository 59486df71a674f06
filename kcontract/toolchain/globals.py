"""Find every __global__ function in CUDA sources, and which of them no entry registers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kcontract.toolchain.headers import include_dirs_of, local_headers
from kcontract.contract.paths import resolve_source

SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".inl")
_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_ATTRIBUTE = re.compile(r"(__launch_bounds__|__maxnreg__|__cluster_dims__|__attribute__|__declspec|alignas)\s*\(")
_WORD = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class GlobalKernel:
    """A __global__ function's name and where it is defined."""

    name: str
    file: Path
    line: int


def _blank(match: re.Match) -> str:
    """Keep newlines so line numbers survive."""
    return re.sub(r"[^\n]", " ", match.group(0))


def _skip_parens(text: str, i: int) -> int:
    """Index after the parenthesis group opening at text[i]."""
    depth = 0
    while i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            break
    return i


def find_globals(path: Path) -> list[GlobalKernel]:
    """Every __global__ function defined or declared in a file (comments, strings and directives ignored)."""
    text = _DIRECTIVE.sub(_blank, _NOISE.sub(_blank, path.read_text(errors="replace")))
    found = []
    for m in re.finditer(r"\b__global__\b", text):
        i = m.end()
        while i < len(text):
            if text[i].isspace() or text[i] in "*&:":
                i += 1
                continue
            attr = _ATTRIBUTE.match(text, i)
            if attr:
                i = _skip_parens(text, attr.end() - 1)
                continue
            word = _WORD.match(text, i)
            if not word:
                break
            j = word.end()
            while j < len(text) and text[j].isspace():
                j += 1
            if j < len(text) and text[j] == "(":
                found.append(GlobalKernel(word.group(0), path, text.count("\n", 0, word.start()) + 1))
                break
            if j < len(text) and text[j] == "<":  # a template-id return type such as Foo<int>
                depth, k = 0, j
                while k < len(text):
                    depth += {"<": 1, ">": -1}.get(text[k], 0)
                    k += 1
                    if depth == 0:
                        break
                i = k
                continue
            i = j
    return found


def base_name(expression: str) -> str:
    """`ns::reduce<128, 256>` -> `reduce`."""
    head = re.split(r"[<(]", expression, maxsplit=1)[0].strip()
    return head.rsplit("::", 1)[-1].strip()


def unregistered(loaded, folders: list[Path]) -> tuple[list[GlobalKernel], list[GlobalKernel]]:
    """(every __global__ under the folders, those no entry's symbols name from a source that holds them)."""
    base = Path(loaded.path).resolve().parent
    covered: dict[Path, set[str]] = {}
    for entry in loaded.entries:
        kernel = entry.kernel.cuda
        if kernel is None:
            continue
        source = resolve_source(base, kernel.source).resolve()
        names = {base_name(e) for e in kernel.symbols.values()}
        for path in [source, *local_headers(source, include_dirs_of(kernel.options, base))]:
            covered.setdefault(path.resolve(), set()).update(names)
    everything: dict[tuple[Path, str], GlobalKernel] = {}
    for folder in folders:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in SUFFIXES) if folder.is_dir() else []
        for path in files:
            for kernel in find_globals(path):
                everything.setdefault((path, kernel.name), kernel)
    everything = list(everything.values())
    missing = [k for k in everything if k.name not in covered.get(k.file.resolve(), set())]
    return everything, missing
