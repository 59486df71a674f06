"""Argued equivalent mutants checked against their kernel source: each names a line that holds what its change
replaces, so an argument left behind when lines move is refused, not silently matched to no survivor."""

from __future__ import annotations

from pathlib import Path

from kcontract.contract.paths import resolve_source

REMOVED = " removed"  # a change that drops a statement: `__syncthreads() removed`
ARROW = " -> "  # a change that replaces a token: `< -> <=`


def replaced(change: str) -> str | None:
    """What a change replaces or removes on its line (None where its form says nothing checkable)."""
    if ARROW in change:
        return change.split(ARROW, 1)[0].strip() or None
    if change.endswith(REMOVED):
        return change[: -len(REMOVED)].strip() or None
    return None


def argued_line_problems(folder: Path, compiled, mutation) -> list[tuple[int, str]]:
    """(index, why) for each argued mutant whose line is past the source's end or lacks what its change replaces."""
    if compiled is None or mutation is None or not mutation.equivalent:
        return []
    path = resolve_source(folder, compiled.source)
    lines = path.read_text(errors="replace").splitlines()
    found = []
    for j, argued in enumerate(mutation.equivalent):
        token = replaced(argued.change)
        if argued.line > len(lines):
            found.append((j, f"a line of {compiled.source} ({len(lines)} lines); move the argument to the line "
                             f"`kcontract mutate` names"))
        elif token is not None and token not in lines[argued.line - 1]:
            found.append((j, f"line {argued.line} of {compiled.source} to hold `{token}`, which change "
                             f"`{argued.change}` replaces (it holds `{lines[argued.line - 1].strip()[:60]}`): move the "
                             f"argument to the line `kcontract mutate` names"))
    return found
