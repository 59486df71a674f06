"""`receipt merge`: shard receipts joined into one receipt of the whole contract for each GPU kind.

Shards must be of one run: the same contract, seed and commit. Each GPU kind's shards must all be shards of one
split (the same N and the same assignment) and hold every shard 1..N exactly once. `Receipt.merge` joins their
rows by the row merge every receipt writer uses (receipts/rows.py), and the SUMMARY is recomputed from the rows as
a whole run's would be; wall_s is the longest shard's, each shard's own kept under `shards`.
"""

from __future__ import annotations

import re
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.receipts.receipt import Receipt, ReceiptError

WHOLE = "give the receipts `kcontract run --shard I/N --receipt FILE` writes"


def read_shard(path: str) -> Receipt:
    """A shard receipt from `path`, or a usage error saying what the file is instead."""
    try:
        receipt = Receipt.read(path)
    except ReceiptError as error:
        raise UsageError(f"{path}: {error.reason}; {WHOLE}") from None
    missing = receipt.lacks("entries", "controls", "counts", "covers")
    if missing:
        raise UsageError(f"{path}: not a kcontract receipt (no {', '.join(missing)}); {WHOLE}")
    if not receipt.is_shard:
        what = "a merged receipt" if receipt.shards else "a receipt of the whole contract"
        raise UsageError(f"{path}: {what}, not a shard's; {WHOLE}")
    if not receipt.has_rows:
        raise UsageError(f"{path}: a shard receipt of the earlier whole-contract form, which has no rows to merge: "
                         f"run its shard again with this kcontract")
    return receipt


def gpu_kind(receipt: Receipt) -> str:
    """The GPU the run used (environment.gpu), or its device ('cpu') when it used none."""
    return receipt.environment.get("gpu") or receipt.device or "cpu"


def slug(kind: str) -> str:
    """`NVIDIA H200` as `h200`, `NVIDIA GeForce RTX 4090` as `geforce-rtx-4090`: a file-name part."""
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"^nvidia\s+", "", kind.lower())).strip("-") or "gpu"


def _fact(receipt: Receipt, what: str):
    """The value shards of one run share, by name."""
    if what == "commit":
        return receipt.commit
    if what == "contract size":
        return [receipt.covers.get(k) for k in ("entries", "controls")]
    return getattr(receipt, what)  # contract, seed


def _differ(what: str, a: Receipt, b: Receipt) -> str:
    """How two shards differ in `what`, in a few words."""
    x, y = _fact(a, what), _fact(b, what)
    return f"{x} vs {y}"


def refuse_mixed(shards: list[tuple[str, Receipt]]) -> None:
    """Every shard of one run: the same contract, seed and commit (each row carries its own sources and
    checker, and is judged by them)."""
    first_path, first = shards[0]
    for path, receipt in shards[1:]:
        for what in ("contract", "contract size", "seed", "commit"):
            if _fact(receipt, what) != _fact(first, what):
                raise UsageError(f"{first_path} and {path} differ in {what} ({_differ(what, first, receipt)}): "
                                 f"merge the shards of one run (one contract, seed, checkout and checker)")


def _index(receipt: Receipt) -> tuple[int, int]:
    """A shard's I and N from `covers.shard`."""
    index, _, count = str(receipt.shard).partition("/")
    return int(index), int(count)


def complete(kind: str, shards: list[tuple[str, Receipt]]) -> list[tuple[str, Receipt]]:
    """One GPU kind's shards ordered 1..N, or a usage error naming an overlap, a hole or another split."""
    first_path, first = shards[0]
    seen: dict[int, str] = {}
    count = _index(first)[1]
    for path, receipt in shards:
        index, n = _index(receipt)
        if n != count or receipt.covers.get("split") != first.covers.get("split"):
            raise UsageError(f"{first_path} and {path} on {kind} are shards of different splits (shard "
                             f"{first.shard} and {receipt.shard}): run every shard with the same N from one "
                             f"checkout, then merge them")
        if index in seen:
            raise UsageError(f"{seen[index]} and {path} are both shard {index}/{count} on {kind}: give each "
                             f"shard's receipt once")
        seen[index] = path
    _refuse_holes(kind, first, count, seen)
    return sorted(shards, key=lambda s: _index(s[1])[0])


def _refuse_holes(kind: str, first: Receipt, count: int, seen: dict[int, str]) -> None:
    """A usage error naming the shards of 1..N not given and what they hold."""
    holes = [i for i in range(1, count + 1) if i not in seen]
    if not holes:
        return
    split = first.covers.get("split") or {}
    names = [name for part in split.values() for name, i in part if i in holes]
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    several = len(holes) > 1
    raise UsageError(f"shard{'s' if several else ''} {', '.join(map(str, holes))} of {count} on {kind} missing "
                     f"({shown or 'nothing in it'}): run `kcontract run --shard I/{count} --receipt FILE` for "
                     f"{'them' if several else 'it'} and give every shard's receipt")


def merge_receipts(loaded, paths: list[str]) -> dict[str, Receipt]:
    """The merged receipt of every GPU kind the shards ran on, by kind; refusals as usage errors."""
    if not paths:
        raise UsageError(f"receipt merge: no receipts given; {WHOLE}")
    shards = [(path, read_shard(path)) for path in paths]
    refuse_mixed(shards)
    contract = Path(loaded.path).name
    for path, receipt in shards:
        if receipt.contract != contract:
            raise UsageError(f"{path}: a shard of {receipt.contract}, not of {loaded.path}: give --contract the "
                             f"contract the shards ran")
    kinds: dict[str, list[tuple[str, Receipt]]] = {}
    for path, receipt in shards:
        kinds.setdefault(gpu_kind(receipt), []).append((path, receipt))
    return {kind: Receipt.merge(loaded, complete(kind, group)) for kind, group in sorted(kinds.items())}


def output_paths(template: str, kinds: list[str]) -> dict[str, str]:
    """Where each kind's merged receipt goes: `-o` as given for one kind; `{gpu}` in it names each of several."""
    if "{gpu}" not in template and len(kinds) > 1:
        raise UsageError(f"-o {template}: the shards ran on {len(kinds)} GPU kinds ({', '.join(kinds)}), one "
                         f"receipt each: put {{gpu}} in the name, e.g. -o receipts/contract-{{gpu}}.json")
    return {kind: template.replace("{gpu}", slug(kind)) for kind in kinds}
