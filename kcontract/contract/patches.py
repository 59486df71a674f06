"""Unified diffs applied exactly to a kernel's source: how controls and mutants plant a fault in production code.

A patch edits one file, the kernel's source (its `---`/`+++` names must end with the source's file name). Every
hunk's context and removed lines must match the source exactly: at the line the hunk names, or, where earlier
edits moved it, at the one place after the previous hunk where they match; there is no fuzz. A patch that does
not apply is a PatchError naming the patch file's line and what differed.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(Exception):
    """A patch that does not apply exactly: where in the patch, and what differed."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line, self.message = line, message


@dataclass(frozen=True)
class Hunk:
    """One hunk: its header's line in the patch file, the old start line, and its lines with their marks."""

    at: int  # 1-based line of the @@ header in the patch file
    old_start: int  # 1-based line in the source where the hunk's old text starts
    lines: tuple[tuple[str, str], ...]  # (" ", "-" or "+", text)

    @property
    def old(self) -> list[str]:
        return [text for mark, text in self.lines if mark in " -"]

    @property
    def new(self) -> list[str]:
        return [text for mark, text in self.lines if mark in " +"]


def parse(text: str, source_name: str) -> list[Hunk]:
    """The hunks of a one-file unified diff whose file names end with `source_name`."""
    lines = text.splitlines()
    names = [(i, line[4:].split("\t")[0].strip()) for i, line in enumerate(lines) if line.startswith(("--- ", "+++ "))]
    if len(names) != 2:
        raise PatchError(1, f"a unified diff of one file (--- and +++ lines once each), found {len(names)} file lines")
    for i, name in names:
        if not name.endswith(source_name):
            raise PatchError(i + 1, f"edits {name!r}, not the kernel's source {source_name!r}")
    hunks: list[Hunk] = []
    i = max(i for i, _ in names) + 1
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            raise PatchError(i + 1, f"a hunk header (@@ -a,b +c,d @@), found {lines[i][:60]!r}")
        at, old_count, new_count = i + 1, int(m.group(2) or 1), int(m.group(4) or 1)
        body: list[tuple[str, str]] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            if line.startswith("\\"):  # "\ No newline at end of file"
                i += 1
                continue
            mark = line[:1] if line else " "
            if mark not in " -+":
                raise PatchError(i + 1, f"a hunk line starting with ' ', '-' or '+', found {line[:60]!r}")
            body.append((mark, line[1:]))
            i += 1
        hunk = Hunk(at, int(m.group(1)), tuple(body))
        if len(hunk.old) != old_count or len(hunk.new) != new_count:
            raise PatchError(at, f"a hunk of {old_count} old and {new_count} new lines as its header says, found "
                                 f"{len(hunk.old)} and {len(hunk.new)}")
        hunks.append(hunk)
    if not hunks:
        raise PatchError(len(lines), "at least one hunk")
    return hunks


def apply(source: str, patch: str, source_name: str) -> str:
    """`source` with `patch` applied exactly; PatchError where it does not apply."""
    lines = source.split("\n")
    out: list[str] = []
    at = 0  # next source line (0-based) not yet copied
    for hunk in parse(patch, source_name):
        old = hunk.old
        start = max(hunk.old_start - 1, 0) if old else hunk.old_start
        if lines[start:start + len(old)] != old:
            places = [k for k in range(at, len(lines) - len(old) + 1) if lines[k:k + len(old)] == old]
            if len(places) != 1:
                raise PatchError(hunk.at, _mismatch(lines, start, old, source_name, len(places)))
            start = places[0]
        if start < at:
            raise PatchError(hunk.at, "hunks in source order, each after the one before")
        out += lines[at:start] + hunk.new
        at = start + len(old)
    return "\n".join(out + lines[at:])


def _mismatch(lines: list[str], start: int, old: list[str], source_name: str, places: int) -> str:
    """What differed at the hunk's own line, and whether it matched nowhere else or in several places."""
    for k, want in enumerate(old):
        have = lines[start + k] if start + k < len(lines) else "(end of file)"
        if have != want:
            where = "nowhere else" if places == 0 else f"{places} other places (give more context)"
            return (f"does not apply to {source_name}: line {start + k + 1} is {have.strip()[:70]!r}, the patch "
                    f"expects {want.strip()[:70]!r}; it matches {where}")
    return f"does not apply to {source_name}: it matches {places} places (give more context)"


def make(original: str, changed: str, source_label: str) -> str:
    """The unified diff that turns `original` into `changed` (`a/` and `b/` names of the source, 3 context lines)."""
    diff = difflib.unified_diff(original.split("\n"), changed.split("\n"), f"a/{source_label}", f"b/{source_label}",
                                lineterm="")
    return "\n".join(diff) + "\n"


def read_patched(source: Path, patch: Path | None) -> bytes:
    """A kernel source's bytes, with its patch applied where it has one (PatchError if it does not apply)."""
    data = source.read_bytes()
    if patch is None:
        return data
    return apply(data.decode("utf-8"), patch.read_text(), source.name).encode("utf-8")
