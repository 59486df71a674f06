"""Which toolchains have records, and gate 5's toolchain findings: what the toolchain in use cannot check.

A finding is not a failure: the toolchain in use has no records of its own (record equality is then checked
only in what no toolchain changes: the sources, symbols and launch shapes), or it cannot build for a target
SM. `--strict-records` turns each finding into a failure, for CI that pins its toolchain.
"""

from __future__ import annotations

from pathlib import Path

from kcontract.records.records import BASELINE

ADD_HINT = "`kcontract records --update` adds them"
STRICT_HINT = "--strict-records makes this a failure"


def recorded_toolchains(root: Path) -> list[str]:
    """The toolchain ids with a records folder under `root`, sorted."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != BASELINE and any(p.glob("*.json")))


def has_own_records(root: Path, toolchain: str) -> bool:
    """Whether the toolchain in use (its id) has records of its own."""
    return toolchain in recorded_toolchains(root)


def toolchain_findings(root: Path, toolchain: str, compiler: str, skipped: list[str]) -> list[str]:
    """One line per finding: records missing for this toolchain (its id; others have them), target SMs its
    compiler (`nvrtc 13.0.88`) cannot build (`skipped`)."""
    found = []
    others = [t for t in recorded_toolchains(root) if t != toolchain]
    if others and not has_own_records(root, toolchain):
        found.append(f"no records for {toolchain} (records exist for {', '.join(others)}): {ADD_HINT}; "
                     f"until then records are compared only in sources, symbols and launch shapes")
    if skipped:
        found.append(f"{compiler} cannot build for {', '.join(skipped)} (contract "
                     f"target{'s' if len(skipped) > 1 else ''}): skipped; a newer NVRTC builds "
                     f"{'them' if len(skipped) > 1 else 'it'}")
    return found
