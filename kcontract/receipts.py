"""Receipt currency: a GPU run's receipt names the sources it ran with their sha256; CI checks they still match.

A receipt is receipts/<name>.json holding at least {"sources": {"kernels/x.cu": "<sha256>", ...}}, paths relative
to the directory that holds receipts/ (the contract's directory). `source_hashes()` builds that mapping.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.errors import ContractError

RECEIPTS_DIR = "receipts"


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_hashes(paths: list[str], base: Path) -> dict[str, str]:
    """{"path": sha256} for a receipt's `sources`, paths relative to `base`."""
    return {p: file_sha256(base / p) for p in sorted(set(paths))}


@dataclass
class ReceiptReport:
    """Each receipt checked: how many, and what went stale."""

    receipts: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No receipt names a source that changed."""
        return not self.stale

    def summary(self) -> str:
        """`no receipts`, `2 receipts current`, or `1 of 2 receipts stale`."""
        if not self.receipts:
            return "no receipts"
        bad = len({line.split(":", 1)[0] for line in self.stale})
        n = len(self.receipts)
        return f"{n} receipt{'s' if n != 1 else ''} current" if not bad else f"{bad} of {n} receipts stale"


def _sources(path: Path, data) -> dict[str, str]:
    """The receipt's source -> sha256 mapping; a malformed receipt is a ContractError."""
    sources = data.get("sources") if isinstance(data, dict) else None
    if isinstance(sources, list):
        sources = {s.get("path"): s.get("sha256") for s in sources if isinstance(s, dict)}
    if not isinstance(sources, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in sources.items()):
        raise ContractError(str(path), None, "sources",
                            'a mapping of source path to sha256 ({"kernels/x.cu": "<sha256>"})')
    return sources


def check_receipts(base: Path) -> ReceiptReport:
    """Check every receipts/*.json under `base` against the sources it names."""
    report = ReceiptReport()
    folder = base / RECEIPTS_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        shown = f"{RECEIPTS_DIR}/{path.name}"
        report.receipts.append(shown)
        try:
            data = json.loads(path.read_text())
        except ValueError as error:
            raise ContractError(shown, getattr(error, "lineno", None), "", "a JSON receipt") from None
        fix = f"run `kcontract run --receipt {shown}` on a GPU"
        for source, digest in sorted(_sources(Path(shown), data).items()):
            target = base / source
            if not target.is_file():
                report.stale.append(f"{shown}: {source} no longer exists: {fix}")
            elif (now := file_sha256(target)) != digest:
                report.stale.append(f"{shown}: {source} changed since the receipt (sha256 {digest[:12]}, "
                                    f"now {now[:12]}): {fix}")
    return report
