"""Mutants of a CUDA source: one small change each, at a code site (comments, strings and includes skipped)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

CLASSES = ("arith", "compare", "bound", "sync", "swap", "math", "const")
SKIP_DIRECTIVES = ("#include", "#if", "#ifdef", "#ifndef", "#endif", "#else", "#elif", "#pragma", "#undef")
ARITH = {" + ": " - ", " - ": " + ", " * ": " / ", " / ": " * "}
COMPARE = {" < ": " <= ", " <= ": " < ", " > ": " >= ", " >= ": " > ", " == ": " != ", " != ": " == "}
INTEGER = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
FLOAT = re.compile(r"(?<![\w.])(\d+\.\d*|\d*\.\d+)(f?)(?![\w.])")
EXP_CALL = re.compile(r"\b(expf|exp2f|__expf|exp2|exp)\s*\(")
SYNC = "__syncthreads();"


@dataclass(frozen=True)
class Mutant:
    """One change: its class, the 1-based line, what it did, and the whole mutated source."""

    ident: str
    kind: str
    line: int
    change: str
    source: str

    def diff(self, original: str) -> str:
        """The changed line, before and after."""
        before = original.splitlines()[self.line - 1].strip()
        after = self.source.splitlines()[self.line - 1].strip()
        return f"line {self.line}: - {before}\n{' ' * (len(str(self.line)) + 6)}+ {after}"


def code_spans(source: str) -> list[tuple[int, int, int]]:
    """(line number, start, end) of the code on each line: comments, string literals and skipped directives out."""
    spans = []
    in_block = False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.lstrip()
        if not in_block and stripped.startswith(SKIP_DIRECTIVES):
            continue
        start, i, end = 0, 0, len(line)
        if stripped.startswith("#define"):
            head = re.match(r"\s*#define\s+\w+(\([^)]*\))?", line)
            start = i = head.end() if head else end
        while i < len(line):
            if in_block:
                close = line.find("*/", i)
                if close < 0:
                    i = end = len(line)
                    break
                in_block, i = False, close + 2
                start = i
                continue
            if line.startswith("//", i):
                end = i
                break
            if line.startswith("/*", i):
                if i > start:
                    spans.append((number, start, i))
                in_block = True
                i += 2
                continue
            if line[i] == '"':
                close = line.find('"', i + 1)
                if i > start:
                    spans.append((number, start, i))
                i = start = (close + 1) if close > 0 else len(line)
                continue
            i += 1
        else:
            end = len(line)
        if not in_block and end > start:
            spans.append((number, start, end))
    return spans


def _sites(source: str) -> list[tuple[str, int, int, int, str, str]]:
    """(kind, line, start, end, replacement, description) for every mutation site."""
    lines = source.splitlines()
    sites = []
    for number, start, end in code_spans(source):
        code = lines[number - 1][start:end]
        for table, kind in ((ARITH, "arith"), (COMPARE, "compare")):
            for op, new in table.items():
                for m in re.finditer(re.escape(op), code):
                    sites.append((kind, number, start + m.start(), start + m.end(), new, f"{op.strip()} -> {new.strip()}"))
        for m in INTEGER.finditer(code):
            value = int(m.group(1))
            for new in (value + 1, value - 1):
                if new >= 0:
                    sites.append(("bound", number, start + m.start(1), start + m.end(1), str(new), f"{value} -> {new}"))
        for m in FLOAT.finditer(code):
            value = float(m.group(1))
            new = "1.0" if value == 0 else repr(value * 2)
            sites.append(("const", number, start + m.start(1), start + m.end(1), new, f"{m.group(1)} -> {new}"))
        for m in re.finditer(re.escape(SYNC), code):
            sites.append(("sync", number, start + m.start(), start + m.end(), "", "__syncthreads() removed"))
        for m in EXP_CALL.finditer(code):
            close = _matching(code, m.end() - 1)
            if close is not None:
                sites.append(("math", number, start + m.start(), start + close + 1, "1.0f",
                              f"{m.group(1)}(...) -> 1.0f"))
    return sites


def _matching(code: str, open_at: int) -> int | None:
    """Index of the parenthesis closing the one at open_at, on the same line."""
    depth = 0
    for i in range(open_at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return None


def swap_sites(source: str, names: tuple[str, ...], spans: list[tuple[int, int, int]]
                ) -> list[tuple[str, int, int, int, str, str]]:
    """Each use of an ABI buffer in the code `spans` replaced by its neighbour in the ABI (a swapped buffer)."""
    lines = source.splitlines()
    present = [n for n in names if re.search(rf"\b{re.escape(n)}\b", source)]
    partner = {a: b for a, b in zip(present, present[1:] + present[:1])} if len(present) > 1 else {}
    sites = []
    for number, start, end in spans:
        code = lines[number - 1][start:end]
        for name, other in partner.items():
            for m in re.finditer(rf"\b{re.escape(name)}\b", code):
                sites.append(("swap", number, start + m.start(), start + m.end(), other, f"{name} -> {other}"))
    return sites


def mutants(source: str, buffers: tuple[str, ...], limit: int, seed: int = 0,
            classes: tuple[str, ...] = CLASSES) -> list[Mutant]:
    """Up to `limit` mutants of a CUDA source, spread over the classes in turn, each class's sites sampled with
    the seed."""
    return chosen_mutants(source, _sites(source) + swap_sites(source, buffers, code_spans(source)), limit, seed,
                          classes)


def chosen_mutants(source: str, sites: list[tuple], limit: int, seed: int, classes: tuple[str, ...]) -> list[Mutant]:
    """Up to `limit` of the sites (kind, line, start, end, replacement, description) as mutants, spread over the
    classes in turn, each class's sites sampled with the seed."""
    by_kind: dict[str, list] = {kind: [] for kind in classes}
    for site in sites:
        if site[0] in by_kind:
            by_kind[site[0]].append(site)
    rng = random.Random(seed)
    for kind in by_kind:
        rng.shuffle(by_kind[kind])
    chosen = []
    while len(chosen) < limit and any(by_kind.values()):
        for kind in classes:
            if by_kind[kind] and len(chosen) < limit:
                chosen.append(by_kind[kind].pop())
    lines = source.splitlines(keepends=True)
    out = []
    for i, (kind, number, start, end, new, change) in enumerate(sorted(chosen, key=lambda s: (s[1], s[2]))):
        text = lines[number - 1]
        mutated = lines[:number - 1] + [text[:start] + new + text[end:]] + lines[number:]
        out.append(Mutant(f"m{i:03d}", kind, number, change, "".join(mutated)))
    return out
