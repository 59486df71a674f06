"""What changed between the base and the head: which entries' kernels changed (their machine code on any SM, their
node in the contract, or the entry is new) and which entries share a source file with one (its current callers,
timed against the base beside it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcontract.review.speed import CALLER, CHANGED
from kcontract.sassdiff.diff import EQUAL, NEW, SassDiff


@dataclass(frozen=True)
class EntryKernel:
    """A head CUDA entry's kernel as sass-diff names it, and how its entry stands against the base's contract."""

    name: str
    source: str  # the source file as the contract writes it
    unit: str  # sass-diff's label of its unit: the source, with a patch where it has one
    expressions: tuple[str, ...]  # its symbols' name expressions
    at_base: bool  # the base's contract has a CUDA entry of this name
    node_changed: bool  # its node in the contract differs from the base's


@dataclass
class Changes:
    """The entries to time, each with why: changed (and how), or a current caller (of which source)."""

    changed: dict[str, str] = field(default_factory=dict)
    callers: dict[str, str] = field(default_factory=dict)

    def role(self, name: str) -> str:
        """CHANGED or CALLER."""
        return CHANGED if name in self.changed else CALLER

    @property
    def timed(self) -> list[str]:
        """Every entry to time: the changed, then the callers."""
        return list(self.changed) + list(self.callers)


def why_changed(diff: SassDiff, kernel: EntryKernel) -> str | None:
    """How an entry changed since the base, or None where it did not."""
    if not kernel.at_base:
        return "new entry"
    mine = [r for r in diff.results if r.label == kernel.unit and r.expression in kernel.expressions]
    moved = sorted({r.sm for r in mine if r.verdict not in EQUAL and r.verdict != NEW})
    if moved:
        return f"machine code changed on {', '.join(moved)}"
    added = sorted({r.expression for r in mine if r.verdict == NEW})
    if added:
        return f"new functions ({', '.join(added[:2])}{' and more' if len(added) > 2 else ''})"
    return "its node changed" if kernel.node_changed else None


def changes(diff: SassDiff, kernels: list[EntryKernel]) -> Changes:
    """The changed entries and, for each source file one of them is built from, the other entries built from it."""
    found = Changes()
    for kernel in kernels:
        why = why_changed(diff, kernel)
        if why is not None:
            found.changed[kernel.name] = why
    touched = {k.source for k in kernels if k.name in found.changed}
    for kernel in kernels:
        if kernel.name not in found.changed and kernel.source in touched:
            found.callers[kernel.name] = kernel.source
    return found
