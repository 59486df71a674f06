"""`receipt merge`: shard receipts joined into one receipt of the whole contract for each GPU kind.

Shards must be of one run: the same contract, seed and commit. Each GPU kind's shards must all be shards of one
split (the same N and the same assignment) and hold every shard 1..N exactly once. Their rows join by the row
merge every receipt writer uses (receipts/rows.py), and the SUMMARY is recomputed from the rows as a whole run's
would be; wall_s is the longest shard's, each shard's own kept under `shards`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.receipts.form import KIND, is_rows, rows_of
from kcontract.receipts.rows import assemble, merged_rows

WHOLE = "give the receipts `kcontract run --shard I/N --receipt FILE` writes"


def read_shard(path: str) -> dict:
    """A shard receipt from `path`, or a usage error saying what the file is instead."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as error:
        raise UsageError(f"{path}: cannot read it ({error.strerror}); {WHOLE}") from None
    except ValueError:
        raise UsageError(f"{path}: not a kcontract receipt (not JSON); {WHOLE}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise UsageError(f"{path}: not a kcontract receipt (no \"kind\": \"{KIND}\"); {WHOLE}")
    missing = [k for k, t in (("entries", list), ("controls", list), ("counts", dict), ("covers", dict))
               if not isinstance(data.get(k), t)]
    if missing:
        raise UsageError(f"{path}: not a kcontract receipt (no {', '.join(missing)}); {WHOLE}")
    if not data["covers"].get("shard"):
        what = "a merged receipt" if data.get("shards") else "a receipt of the whole contract"
        raise UsageError(f"{path}: {what}, not a shard's; {WHOLE}")
    if not is_rows(data):
        raise UsageError(f"{path}: a shard receipt of the earlier whole-contract form, which has no rows to merge: "
                         f"run its shard again with this kcontract")
    return data


def gpu_kind(receipt: dict) -> str:
    """The GPU the run used (environment.gpu), or its device ('cpu') when it used none."""
    return (receipt.get("environment") or {}).get("gpu") or receipt.get("device") or "cpu"


def slug(kind: str) -> str:
    """`NVIDIA H200` as `h200`, `NVIDIA GeForce RTX 4090` as `geforce-rtx-4090`: a file-name part."""
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"^nvidia\s+", "", kind.lower())).strip("-") or "gpu"


def _fact(data: dict, what: str):
    """The value shards of one run share, by name."""
    if what == "commit":
        return (data.get("git") or {}).get("commit")
    if what == "contract size":
        return [(data.get("covers") or {}).get(k) for k in ("entries", "controls")]
    return data.get(what)


def _differ(what: str, a: dict, b: dict) -> str:
    """How two shards differ in `what`, in a few words."""
    x, y = _fact(a, what), _fact(b, what)
    return f"{x} vs {y}"


def refuse_mixed(shards: list[tuple[str, dict]]) -> None:
    """Every shard of one run: the same contract, seed and commit (each row carries its own sources and
    checker, and is judged by them)."""
    first_path, first = shards[0]
    for path, data in shards[1:]:
        for what in ("contract", "contract size", "seed", "commit"):
            if _fact(data, what) != _fact(first, what):
                raise UsageError(f"{first_path} and {path} differ in {what} ({_differ(what, first, data)}): "
                                 f"merge the shards of one run (one contract, seed, checkout and checker)")


def _index(data: dict) -> tuple[int, int]:
    """A shard's I and N from `covers.shard`."""
    index, _, count = str(data["covers"]["shard"]).partition("/")
    return int(index), int(count)


def complete(kind: str, shards: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """One GPU kind's shards ordered 1..N, or a usage error naming an overlap, a hole or another split."""
    first_path, first = shards[0]
    seen: dict[int, str] = {}
    count = _index(first)[1]
    for path, data in shards:
        index, n = _index(data)
        if n != count or data["covers"].get("split") != first["covers"].get("split"):
            raise UsageError(f"{first_path} and {path} on {kind} are shards of different splits (shard "
                             f"{first['covers']['shard']} and {data['covers']['shard']}): run every shard with "
                             f"the same N from one checkout, then merge them")
        if index in seen:
            raise UsageError(f"{seen[index]} and {path} are both shard {index}/{count} on {kind}: give each "
                             f"shard's receipt once")
        seen[index] = path
    holes = [i for i in range(1, count + 1) if i not in seen]
    if holes:
        split = first["covers"].get("split") or {}
        names = [name for part in split.values() for name, i in part if i in holes]
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        raise UsageError(f"shard{'s' if len(holes) > 1 else ''} {', '.join(map(str, holes))} of {count} on {kind} "
                         f"missing ({shown or 'nothing in it'}): run `kcontract run --shard I/{count} --receipt "
                         f"FILE` for {'them' if len(holes) > 1 else 'it'} and give every shard's receipt")
    return sorted(shards, key=lambda s: _index(s[1])[0])


def merge_kind(loaded, shards: list[tuple[str, dict]]) -> dict:
    """One receipt of the whole contract from one GPU kind's complete shards (ordered 1..N): their rows joined, the
    SUMMARY recomputed from them."""
    datas = [data for _, data in shards]
    rows: dict = {}
    scores: dict = {"mutation": {}, "coverage": {}}
    for data in datas:
        rows = merged_rows(loaded, rows, rows_of(data))
        for what in scores:
            scores[what] = {**(data.get(what) or {}), **scores[what]}
    runs = [run for data in datas for run in data.get("runs") or []]
    notes = list(dict.fromkeys(n for data in datas for n in data.get("notes") or []))
    extra = {"wall_s": max(float(d.get("wall_s") or 0) for d in datas),
             "shards": [{"shard": d["covers"]["shard"], "file": Path(path).name, "wall_s": d.get("wall_s"),
                         "created": d.get("created"), "entries": (d["covers"].get("covered") or {}).get("entries"),
                         "controls": (d["covers"].get("covered") or {}).get("controls")} for path, d in shards]}
    extra |= {what: dict(sorted(kept.items())) for what, kept in scores.items() if kept}
    if datas[0].get("bench"):
        extra["bench"], extra["bench_ceiling"] = datas[0]["bench"], datas[0].get("bench_ceiling", {})
    merged = assemble(loaded, rows, runs, notes=notes, covers={"shards": len(datas)}, extra=extra)
    merged["git"] = {"commit": (datas[0].get("git") or {}).get("commit"),
                     "dirty": None if any((d.get("git") or {}).get("dirty") is None for d in datas)
                     else any((d.get("git") or {}).get("dirty") for d in datas)}
    return merged


def merge_receipts(loaded, paths: list[str]) -> dict[str, dict]:
    """The merged receipt of every GPU kind the shards ran on, by kind; refusals as usage errors."""
    if not paths:
        raise UsageError(f"receipt merge: no receipts given; {WHOLE}")
    shards = [(path, read_shard(path)) for path in paths]
    refuse_mixed(shards)
    contract = Path(loaded.path).name
    for path, data in shards:
        if data.get("contract") != contract:
            raise UsageError(f"{path}: a shard of {data.get('contract')}, not of {loaded.path}: give --contract the "
                             f"contract the shards ran")
    kinds: dict[str, list[tuple[str, dict]]] = {}
    for path, data in shards:
        kinds.setdefault(gpu_kind(data), []).append((path, data))
    return {kind: merge_kind(loaded, complete(kind, group)) for kind, group in sorted(kinds.items())}


def output_paths(template: str, kinds: list[str]) -> dict[str, str]:
    """Where each kind's merged receipt goes: `-o` as given for one kind; `{gpu}` in it names each of several."""
    if "{gpu}" not in template and len(kinds) > 1:
        raise UsageError(f"-o {template}: the shards ran on {len(kinds)} GPU kinds ({', '.join(kinds)}), one "
                         f"receipt each: put {{gpu}} in the name, e.g. -o receipts/contract-{{gpu}}.json")
    return {kind: template.replace("{gpu}", slug(kind)) for kind in kinds}
