"""The run as JSON: every outcome, gate result and the summary."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kcontract.profiling import SPLIT
from kcontract.verdict.outcome import Outcome
from kcontract.verdict.summary import Summary


def _plain(value):
    """Dataclasses and numpy scalars as JSON-friendly values."""
    if dataclasses.is_dataclass(value):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def run_document(entries: list[Outcome], controls: list[Outcome], summary: Summary,
                 planted: dict[str, int], toolchain=None, since: float | None = None) -> dict:
    """Everything a report or receipt needs; `toolchain` is the one that built the CUDA kernels, if any; `since`:
    the `time.monotonic()` the run began, which the timeline counts from."""
    return {
        "summary": summary.line(),
        "exit_code": int(summary.exit_code),
        "toolchain": toolchain.as_dict() if toolchain is not None else None,
        "counts": _plain(summary),
        "planted": dict(planted),
        "references": reference_counts(entries + controls),
        "inputs": reference_counts(entries + controls, "inputs"),
        "stages": stage_seconds(entries + controls),
        "entries": [_outcome(o) for o in entries],
        "controls": [_outcome(o) for o in controls],
        "timeline": timeline(entries + controls, since),
    }


def _outcome(outcome: Outcome) -> dict:
    """An outcome as rows keep it: its timeline goes under the document's `timeline`."""
    plain = _plain(outcome)
    plain.pop("spans", None)
    return plain


def timeline(outcomes: list[Outcome], since: float | None) -> list[dict]:
    """Each task the pool ran, by start: its worker slot, gates, declared device bytes and the seconds since
    `since` (the first task's wait, where None) at which it was ready, started (its device bytes fit) and ended."""
    spans = [(o, span) for o in outcomes for span in o.spans]
    if not spans:
        return []
    zero = since if since is not None else min(span.queued for _, span in spans)
    return [{"kind": o.task.kind, "name": o.task.name, "gates": span.gates, "slot": span.slot,
             "device_mb": round(span.device_bytes / (1 << 20)), "ready_s": round(span.queued - zero, 2),
             "start_s": round(span.started - zero, 2), "end_s": round(span.ended - zero, 2)}
            for o, span in sorted(spans, key=lambda item: item[1].started)]


def reference_counts(outcomes: list[Outcome], what: str = "references") -> dict:
    """How many references (or drawn inputs) came from the cache, were made or rebuilt; 'warm' when all cached."""
    counts = {"hit": 0, "miss": 0, "rebuilt": 0, "off": 0}
    for o in outcomes:
        for r in o.gates.values():
            for key, n in r.profile.get(what, {}).items():
                counts[key] = counts.get(key, 0) + n
    counts["cache"] = cache_state(counts)
    return counts


def stage_seconds(outcomes: list[Outcome]) -> dict:
    """Seconds the run's tasks spent per stage, summed over every gate of every entry and control."""
    names = [f"{name}_s" for name in SPLIT]
    total = {name: sum(r.profile.get(name, 0.0) for o in outcomes for r in o.gates.values()) for name in names}
    return {name: round(seconds, 1) for name, seconds in total.items()}


def cache_state(counts: dict) -> str:
    """'warm' when every reference came from the cache, 'cold' when none did, else 'mixed', 'off' or 'none'."""
    used = counts["hit"] + counts["miss"] + counts["rebuilt"]
    return ("off" if counts["off"] and not used else "warm" if used and counts["hit"] == used
            else "cold" if used and not counts["hit"] else "mixed" if used else "none")


def write_json(path: str, document: dict) -> None:
    """Write the document, creating parent folders."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
