"""Mutants of a Triton source: one small change each, at a code site of its jit functions' bodies (comments,
strings, docstrings, imports, decorators and signatures skipped)."""

from __future__ import annotations

import re

from kcontract.mutate.operators import ARITH, COMPARE, FLOAT, INTEGER, Mutant, chosen_mutants, swap_sites

CLASSES = ("arith", "compare", "bound", "mask", "other", "axis", "dtype", "pid", "const", "swap")
SKIPPED = ("import ", "from ", "@", "def ")
DTYPES = {"tl.float32": ("tl.bfloat16", "tl.float16"), "tl.int64": ("tl.int32",), "tl.bfloat16": ("tl.float32",)}
MASK_BOUND = re.compile(r"(<=?|>=?)\s*([A-Za-z_][\w.]*)")  # a comparison's right operand, as masks write them
OTHER = re.compile(r",\s*other\s*=\s*[^,()]+(?:\([^()]*\))?")
AXIS = re.compile(r"\baxis\s*=\s*(\d+)")
PROGRAM_ID = re.compile(r"\b(program_id|num_programs)\((\d)\)")


def python_spans(source: str) -> list[tuple[int, int, int]]:
    """(line number, start, end) of the code on each line: comments, string literals (docstrings too) and the
    lines that import, decorate or define out."""
    spans = []
    quote = None  # the triple quote a docstring is open with
    for number, line in enumerate(source.splitlines(), 1):
        if quote is not None:
            if quote in line:
                quote = None
            continue
        stripped = line.lstrip()
        if stripped.startswith(('"""', "'''")):
            mark = stripped[:3]
            if stripped.count(mark) == 1:
                quote = mark
            continue
        if stripped.startswith(SKIPPED) or not stripped:
            continue
        start = i = len(line) - len(stripped)
        end = len(line)
        while i < len(line):
            if line[i] == "#":
                end = i
                break
            if line[i] in "\"'":
                close = line.find(line[i], i + 1)
                if i > start:
                    spans.append((number, start, i))
                i = start = (close + 1) if close > 0 else len(line)
                continue
            i += 1
        if end > start:
            spans.append((number, start, end))
    return spans


def triton_mutants(source: str, buffers: tuple[str, ...], limit: int, seed: int = 0,
                   classes: tuple[str, ...] = CLASSES) -> list[Mutant]:
    """Up to `limit` mutants of a Triton source, spread over the classes in turn, each class's sites sampled with
    the seed."""
    spans = python_spans(source)
    return chosen_mutants(source, _sites(source, spans) + swap_sites(source, buffers, spans), limit, seed, classes)


def _sites(source: str, spans: list[tuple[int, int, int]]) -> list[tuple[str, int, int, int, str, str]]:
    """(kind, line, start, end, replacement, description) for every mutation site."""
    lines = source.splitlines()
    sites = []
    for number, start, end in spans:
        code = lines[number - 1][start:end]

        def add(kind: str, m: re.Match, new: str, change: str, group: int = 0) -> None:
            sites.append((kind, number, start + m.start(group), start + m.end(group), new, change))

        for table, kind in ((ARITH, "arith"), (COMPARE, "compare")):
            for op, new in table.items():
                for m in re.finditer(re.escape(op), code):
                    add(kind, m, new, f"{op.strip()} -> {new.strip()}")
        owned = [m.span() for pattern in (PROGRAM_ID, AXIS) for m in pattern.finditer(code)]
        for m in INTEGER.finditer(code):
            if any(lo <= m.start() < hi for lo, hi in owned):
                continue  # the pid and axis classes own these
            value = int(m.group(1))
            for new in (value + 1, value - 1):
                if new >= 0:
                    add("bound", m, str(new), f"{value} -> {new}", 1)
        for m in MASK_BOUND.finditer(code):
            for delta in (" + 1", " - 1"):
                add("mask", m, f"{m.group(1)} {m.group(2)}{delta}", f"{m.group(0)} -> {m.group(1)} {m.group(2)}{delta}")
        for m in OTHER.finditer(code):
            add("other", m, "", f"{m.group(0).lstrip(', ')} dropped")
        for m in AXIS.finditer(code):
            new = "1" if m.group(1) == "0" else "0"
            add("axis", m, new, f"axis={m.group(1)} -> axis={new}", 1)
        for name, others in DTYPES.items():
            for m in re.finditer(rf"\b{re.escape(name)}\b", code):
                for other in others:
                    add("dtype", m, other, f"{name} -> {other}")
        for m in PROGRAM_ID.finditer(code):
            new = "1" if m.group(2) == "0" else "0"
            add("pid", m, new, f"{m.group(1)}({m.group(2)}) -> {m.group(1)}({new})", 2)
        for m in FLOAT.finditer(code):
            value = float(m.group(1))
            new = "1.0" if value == 0 else repr(value * 2)
            add("const", m, new, f"{m.group(1)} -> {new}", 1)
    return sites
