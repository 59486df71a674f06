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
