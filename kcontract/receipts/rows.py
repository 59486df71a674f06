"""Rows made from a run's outcomes, merged into a receipt, and the receipt's SUMMARY recomputed from its rows
(receipt.py's `Receipt.put_rows` puts them in the file).

One merge serves every writer: a whole run replaces every row, `run --stale` replaces the rows it re-ran and
keeps the rest, a shard writes its own rows and `receipt merge` joins shards' rows. Rows of entries or controls
the contract no longer has are dropped on every write; the SUMMARY is always the one a whole run of the rows'
outcomes would print.
"""

from __future__ import annotations

import datetime
import hashlib
import json

from kcontract.receipts.depends import row_checker, row_depends
from kcontract.receipts.schema import KINDS, row_key
from kcontract.verdict.outcome import outcome_from_plain
from kcontract.verdict.summary import Summary, summarise


def now() -> str:
    """The current UTC time as receipts stamp it."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_id(run: dict) -> str:
    """A run's id: a short digest of its record, unique across the runs a receipt keeps."""
    return hashlib.sha256(json.dumps(run, sort_keys=True, default=str).encode()).hexdigest()[:12]


def cache_state(run: dict) -> str:
    """"warm" where a run took every input and reference from the cache, else "cold"."""
    stores = [run.get("inputs"), run.get("references")]
    warm = all(isinstance(s, dict) and s.get("cache") == "warm" for s in stores)
    return "warm" if warm else "cold"


def kept_runs(runs: list[dict], owners: set) -> list[dict]:
    """The runs that own a row, and the newest whole-contract run per device and cache state (its wall seconds are
    the tool's speed), in the order given."""
    newest = {(run.get("device"), cache_state(run)): run["id"] for run in runs if run.get("mode") == "whole"}
    keep = owners | set(newest.values())
    return [run for run in runs if run["id"] in keep]


def ran_of(run: dict) -> dict:
    """What each row of a run records of where and how it ran."""
    env = run.get("environment") or {}
    git = run.get("git") or {}
    return {"run": run["id"], "created": run.get("created"), "commit": git.get("commit"), "dirty": git.get("dirty"),
            "device": run.get("device"), "gpu": env.get("gpu"), "sm": env.get("sm"),
            "toolchain": (run.get("toolchain") or {}).get("id")}


def make_row(loaded, outcome: dict, run: dict) -> dict:
    """A row: an outcome (as the JSON report writes it) with its dependencies, checker and run (the SM and
    toolchain of the cubin it ran, where it ran one)."""
    kind, name = row_key(outcome)
    kernel = outcome.get("kernel") or {}
    ran = ran_of(run) | {k: kernel[k] for k in ("sm", "toolchain") if kernel.get(k)}
    return {**outcome, "depends": row_depends(loaded, kind, name), "checker": row_checker(loaded, kind, name),
            "ran": ran}


def computed_nothing(profile: dict) -> bool:
    """Whether a gate took its inputs and references from the cache and computed none of them (a warm gate)."""
    stores = [profile.get(what) for what in ("inputs", "references")]
    counts = [s for s in stores if isinstance(s, dict)]
    took = sum(s.get("hit", 0) for s in counts)
    computed = sum(s.get("miss", 0) + s.get("off", 0) + s.get("rebuilt", 0) for s in counts)
    return bool(counts) and took > 0 and computed == 0


def took_references(profile: dict) -> bool:
    """Whether a gate took any of its references from the cache (in a cold run: ones another gate made first)."""
    references = profile.get("references")
    return isinstance(references, dict) and references.get("hit", 0) > 0


def cold_measures(result: dict) -> dict | None:
    """What a gate took and held the last time it computed its inputs and references (seconds, live_gpu_mb):
    its own where it computed them, else those it carries (`cold`), else None. A gate that computed some but took
    references from the cache measured less than its own cold cost: the larger of its seconds and what it carries."""
    profile = result.get("profile") if isinstance(result.get("profile"), dict) else {}
    carried = result.get("cold") if isinstance(result.get("cold"), dict) else None
    if computed_nothing(profile):
        return carried
    own = {"seconds": result.get("seconds"), "live_gpu_mb": profile.get("live_gpu_mb")}
    if carried is not None and took_references(profile) and (carried.get("seconds") or 0) > (own["seconds"] or 0):
        return carried
    return own


def with_cold_measures(row: dict, before: dict | None) -> dict:
    """A row whose warm gates keep, as `cold`, the measures of the earlier row's run that computed their inputs
    and references, so a cold run plans by what it will take and hold (receipts/durations.py); a gate that took
    references another gate made keeps them too where they are the larger."""
    earlier = (before or {}).get("gates") if isinstance((before or {}).get("gates"), dict) else {}
    for number, result in (row.get("gates") or {}).items():
        prior = earlier.get(number)
        if isinstance(result, dict) and isinstance(prior, dict):
            cold = _carried(result, cold_measures(prior))
            if cold is not None:
                result["cold"] = cold
    return row


def _carried(result: dict, cold: dict | None) -> dict | None:
    """The earlier cold measures a gate's result keeps: all of them where it computed nothing, those of more
    seconds where it took references from the cache; else none."""
    profile = result.get("profile") if isinstance(result.get("profile"), dict) else {}
    if cold is None or computed_nothing(profile):
        return cold
    longer = (cold.get("seconds") or 0) > (result.get("seconds") or 0)
    return cold if took_references(profile) and longer else None


def contract_keys(loaded) -> list[tuple[str, str]]:
    """Every row the contract calls for, entries then controls, in file order."""
    return [("entry", e.name) for e in loaded.entries] + [("control", c.name) for c in loaded.controls]


def merged_rows(loaded, kept: dict, new: dict) -> dict[tuple[str, str], dict]:
    """`kept` rows with `new` ones in their place, in the contract's order; rows the contract no longer has
    dropped."""
    rows = {**kept, **new}
    return {key: rows[key] for key in contract_keys(loaded) if key in rows}


def rows_summary(loaded, rows: dict[tuple[str, str], dict], notes: list[str] = ()) -> Summary:
    """The SUMMARY a whole run with these rows' outcomes would print, judged against the contract's known findings
    (a row of a control names the gate it is planted at in the contract)."""
    outcomes = {kind: [outcome_from_plain(r) for (k, _), r in rows.items() if k == kind] for kind in KINDS}
    planted = {c.name: c.gate for c in loaded.controls}
    return summarise(outcomes["entry"], outcomes["control"], loaded.known_findings, planted, list(notes))
