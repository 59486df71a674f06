"""A receipt's rooflines: the folder beside it that holds them, and the stamp each SVG carries of the bench rows it
was drawn from, so a receipt whose bench changed says which of its plots are stale."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from kcontract.receipts.receipt import Receipt

PLOTS_SUFFIX = ".plots"  # `receipts/contract-h200.plots` beside `receipts/contract-h200.json`
STAMP_WORDS = "kcontract bench rows"
STAMP = re.compile(STAMP_WORDS + r" ([0-9a-f]{64})")


def rows_digest(rows: list[dict], ceiling: dict) -> str:
    """The digest of the bench rows and ceilings a set of plots is drawn from."""
    text = json.dumps({"rows": rows, "ceiling": ceiling}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def plots_beside(receipt: Path) -> Path:
    """The folder of a receipt's rooflines."""
    return receipt.with_suffix(PLOTS_SUFFIX)


def drawn_from(svg: Path) -> str | None:
    """The rows digest an SVG of ours was drawn from, or None where it carries none."""
    try:
        found = STAMP.search(svg.read_text(errors="replace"))
    except OSError:
        return None
    return found.group(1) if found else None


def receipt_plots(path: Path, receipt: Receipt) -> list[tuple[Path, bool]]:
    """The SVGs beside the receipt at `path`, each with whether it was drawn from the receipt's bench rows."""
    folder = plots_beside(path)
    digest = rows_digest(receipt.bench, receipt.bench_ceiling)
    return [(svg, drawn_from(svg) == digest) for svg in sorted(folder.glob("*.svg"))] if folder.is_dir() else []


def redraw_command(receipt: str) -> str:
    """The command that draws a receipt's rooflines again, from its bench rows."""
    return f"kcontract bench --from-receipt {receipt} --plot {plots_beside(Path(receipt)).as_posix()}"
