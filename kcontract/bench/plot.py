"""Rooflines of bench rows, one SVG per family: the rate each call reached against its size, with its ceiling
and the peer beside it, and below, the share of the limit each reached (matplotlib, the `plot` extra)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from kcontract.errors import EnvironmentProblem, UsageError
from kcontract.receipts.plots import STAMP_WORDS, rows_digest

PANELS = {  # bound -> (rate key, x label, y label, ceiling key, size of the call)
    "memory": ("gbps", "bytes moved per call", "GB/s", "read_gbps", lambda r: r["bytes"]),
    "compute": ("tflops", "floating-point operations per call", "TFLOP/s", "mma_tflops",
                lambda r: r["tflops"] * 1e12 * r["us"] * 1e-6),
}


def _figure():
    """A matplotlib Figure class, or why there is none."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise EnvironmentProblem("--plot needs matplotlib: pip install 'kcontract[plot]'") from None
    return Figure


def peer_rate(row: dict, key: str) -> float | None:
    """The peer's rate at the same call: its TFLOP/s as measured, or our GB/s scaled by the time ratio."""
    if key == "tflops" and row.get("peer_tflops") is not None:
        return row["peer_tflops"]
    return row[key] * row["us"] / row["peer_us"] if row.get("peer_us") else None


def share(row: dict) -> float:
    """The share of its roofline a call reached: the larger of its read and mma shares (the one that binds)."""
    return max(row["ratio"], row.get("mma_ratio", 0.0))


def bound(row: dict) -> str:
    """The limit that binds the call: the mma ceiling where its share of it is the larger, else the read ceiling."""
    return "compute" if row.get("mma_ratio", 0.0) > row["ratio"] else "memory"


def plot_family(family: str, rows: list[dict], ceiling: dict, folder: Path, digest: str = "") -> Path:
    """The family's SVG: a rate panel per bound its calls have, then the share of the limit; stamped with the
    digest of the rows it was drawn from, and with no date, so the same rows draw the same file."""
    bounds = [b for b in PANELS if any(bound(r) == b for r in rows)]
    figure = _figure()(figsize=(8, 3.2 * (len(bounds) + 1)))
    axes = figure.subplots(len(bounds) + 1, 1, squeeze=False)[:, 0]
    for ax, limit in zip(axes, bounds):
        _rate_panel(ax, [r for r in rows if bound(r) == limit], limit, ceiling)
    _share_panel(axes[-1], rows)
    figure.suptitle(f"{family}: measured against the H200's limits", fontsize=11)
    figure.tight_layout()
    path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', family)}.svg"
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "kcontract"}):
        figure.savefig(path, format="svg", metadata={"Date": None, "Description": f"{STAMP_WORDS} {digest}"})
    return path


def _rate_panel(ax, rows: list[dict], limit_name: str, ceiling: dict) -> None:
    """Each call's rate against its size, the peer's beside it, and the ceiling."""
    key, xlabel, ylabel, limit, size = PANELS[limit_name]
    for call, group in _by_call(rows).items():
        line = ax.plot([size(r) for r in group], [r[key] for r in group], "o-", label=call)[0]
        peers = [(size(r), peer_rate(r, key)) for r in group if peer_rate(r, key) is not None]
        if peers:
            ax.plot(*zip(*peers), "x--", color=line.get_color(), alpha=0.6, label=f"{call}: peer")
    top = ceiling.get(limit)
    if top:
        ax.axhline(top, color="black", linewidth=1, label=f"ceiling {top:,.0f} {ylabel}")
    ax.set(xscale="log", xlabel=xlabel, ylabel=ylabel)
    ax.legend(fontsize=6, ncol=2)


def _share_panel(ax, rows: list[dict]) -> None:
    """Each call's share of its limit against its size in bytes."""
    for call, group in _by_call(rows).items():
        ax.plot([r["bytes"] for r in group], [100 * share(r) for r in group], "o-", label=call)
    ax.axhline(100, color="black", linewidth=1)
    ax.set(xscale="log", xlabel="bytes moved per call", ylabel="% of the roofline",
           ylim=(0, max(105, 5 + max(100 * share(r) for r in rows))))
    ax.legend(fontsize=6, ncol=2)


def _by_call(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows per call (named by the call, and by its entry too where two entries share a call), ordered by size."""
    entries: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        entries[row["call"]].add(row["entry"])
    calls: dict[str, list[dict]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r["bytes"]):
        shared = len(entries[row["call"]]) > 1
        calls[f"{row['entry']}: {row['call']}" if shared else row["call"]].append(row)
    return calls


def plot_rows(rows: list[dict], families: dict[str, str], ceiling: dict, folder: Path) -> list[Path]:
    """One SVG per family (`families`: entry -> family; entries no longer in the contract go under 'other')."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--plot {folder}: cannot make the folder ({error.strerror}): name a writable one") from None
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[families.get(row["entry"], "other")].append(row)
    digest = rows_digest(rows, ceiling)
    return [plot_family(family, group, ceiling, folder, digest) for family, group in sorted(grouped.items())]
