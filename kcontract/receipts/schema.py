"""The receipt file's schema, in one place: its kind and format, where it lives, its fields and a row's key.

A receipt (`receipts/<contract>-<device>.json`, JSON, `"kind": "kcontract-run"`, `"format": 2`) holds a row per
entry (`entries`) and per control (`controls`) of its contract. A row is the outcome of that entry's or control's
run (`task`, `status`, `gates`, `seconds`, `kernel`) with what it depended on (`depends`: its node's digest, the
seed, its files' sha256), the checker that judged it (`checker`) and where and how it ran (`ran`: the run's id,
commit, device, GPU, SM, toolchain); a gate that computed none of its inputs and references carries, as `cold`,
the seconds and device bytes of the last run that did. Beside the rows: the runs that wrote them and the newest
whole runs from a cold cache and from a warm one (`runs`), the SUMMARY recomputed from the rows, bench rows,
mutation scores and coverage records keyed by kernel source. A receipt without `format`
is the earlier whole-contract form (`sources`, `checker` and one run's facts at the top); `kcontract receipt
upgrade` turns it into rows. A receipt of a higher format was written by a newer kcontract.
"""

from __future__ import annotations

from pathlib import Path

RECEIPTS_DIR = "receipts"
KIND = "kcontract-run"
FORMAT = 2
KINDS = ("entry", "control")
LISTS = {"entry": "entries", "control": "controls"}
RUN_FACTS = ("device", "git", "environment", "toolchain", "wall_s")  # a receipt's, from the last run that owns a row
LOCK_SUFFIX = ".lock"  # `receipts/x.json.lock` beside `receipts/x.json`: held by every write of it

# Every field of a receipt that holds a list or a mapping, with its type: read as that type, else as its empty value.
CONTAINERS: dict[str, type] = {
    "entries": list, "controls": list, "runs": list, "bench": list, "shards": list, "notes": list,
    "covers": dict, "counts": dict, "git": dict, "environment": dict, "bench_ceiling": dict, "mutation": dict,
    "coverage": dict, "planted": dict,
    "sources": dict, "checker": dict,  # the earlier whole-contract form's
}


def receipt_name(contract: Path, device: str) -> str:
    """`receipts/contract-h200.json`: what the receipt covers and where it ran."""
    return f"{RECEIPTS_DIR}/{contract.stem}-{device}.json"


def lock_of(path: Path) -> Path:
    """The lock file every write of the receipt at `path` holds."""
    return path.with_name(path.name + LOCK_SUFFIX)


def row_key(row: dict) -> tuple[str, str]:
    """("entry" | "control", name) of a row."""
    task = row.get("task") if isinstance(row.get("task"), dict) else {}
    return str(task.get("kind", "")), str(task.get("name", ""))
