"""`receipt merge`: shard receipts joined into one receipt of the whole contract for each GPU kind.

Shards must be of one run: the same contract, seed, sources, checker and commit. Each GPU kind's shards must
all be shards of one split (the same N and the same assignment) and hold every shard 1..N exactly once. The
merged SUMMARY is recomputed with kcontract's Summary from the shards' summed counts, so its wording is the
whole run's; its wall_s is the longest shard's, each shard's own kept under `shards`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.receipts import KIND
from kcontract.report.json_report import cache_state
from kcontract.verdict.summary import Summary

NUMBERS = ("kernels", "passed", "failed", "known", "controls", "red", "missed", "limit_problems")
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
    if what == "sources" and isinstance(x, dict) and isinstance(y, dict):
        changed = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
        return f"{changed[0]}: sha256 {str(x.get(changed[0]))[:12]} vs {str(y.get(changed[0]))[:12]}"
    if what == "checker" and isinstance(x, dict) and isinstance(y, dict):
        if x.get("sha256") != y.get("sha256"):
            return f"core sha256 {str(x.get('sha256'))[:12]} vs {str(y.get('sha256'))[:12]}"
        fx, fy = x.get("families") or {}, y.get("families") or {}
        name = next((k for k in sorted(set(fx) | set(fy)) if fx.get(k) != fy.get(k)), None)
        if name is not None:
            return f"family {name} sha256 {str(fx.get(name))[:12]} vs {str(fy.get(name))[:12]}"
        return f"version {x.get('version')} vs {y.get('version')}"
    return f"{x} vs {y}"


def refuse_mixed(shards: list[tuple[str, dict]]) -> None:
    """Every shard of one run: the same contract, seed, sources, checker and commit."""
    first_path, first = shards[0]
    for path, data in shards[1:]:
        for what in ("contract", "contract size", "seed", "sources", "checker", "commit"):
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


def _ordered(items: list[dict], split: list) -> list[dict]:
    """Outcomes in the whole run's plan order (the split's), unknown names last by name."""
    rank = {name: i for i, (name, _) in enumerate(split)}
    return sorted(items, key=lambda o: (rank.get(o["task"]["name"], len(rank)), o["task"]["name"]))


def merged_summary(counts: list[dict], entry_order: list[str], control_order: list[str]) -> Summary:
    """The whole run's Summary from the shards' counts: numbers summed, lists joined."""
    summary = Summary(**{k: sum(int(c.get(k) or 0) for c in counts) for k in NUMBERS})
    ran = [c for c in counts if c.get("kernels") or c.get("controls")] or counts
    summary.judged = sorted({g for c in ran for g in c.get("judged") or []}) or summary.judged
    summary.case = counts[0].get("case") if counts else None
    summary.interrupted = any(c.get("interrupted") for c in counts)

    def joined(key: str, order: list[str] | None = None) -> list[str]:
        items = list(dict.fromkeys(x for c in counts for x in c.get(key) or []))
        rank = {name: i for i, name in enumerate(order or [])}
        return sorted(items, key=lambda x: rank.get(x, len(rank))) if order else items

    summary.failing_entries = joined("failing_entries", entry_order)
    summary.record_failures = joined("record_failures", entry_order)
    summary.missed_controls = joined("missed_controls", control_order)
    summary.stale_known, summary.notes, summary.findings = joined("stale_known"), joined("notes"), joined("findings")
    summary.environment = sorted(joined("environment"))
    return summary


def _cache_counts(shards: list[dict], what: str) -> dict:
    """References (or inputs) from the cache, summed over shards."""
    counts = {"hit": 0, "miss": 0, "rebuilt": 0, "off": 0}
    for data in shards:
        for key, n in (data.get(what) or {}).items():
            if key != "cache":
                counts[key] = counts.get(key, 0) + int(n)
    counts["cache"] = cache_state(counts)
    return counts


def merge_kind(shards: list[tuple[str, dict]]) -> dict:
    """One receipt of the whole contract from one GPU kind's complete shards (ordered 1..N)."""
    datas = [data for _, data in shards]
    first = datas[0]
    split = first["covers"].get("split") or {}
    entry_split, control_split = split.get("entries") or [], split.get("controls") or []
    summary = merged_summary([d["counts"] for d in datas], [n for n, _ in entry_split], [n for n, _ in control_split])
    dirty = [(d.get("git") or {}).get("dirty") for d in datas]
    mutation: dict = {}
    for data in datas:
        mutation = {**(data.get("mutation") or {}), **mutation}
    merged = {k: v for k, v in first.items() if k not in ("mutation",)}
    merged |= {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "covers": {"entries": first["covers"].get("entries"), "controls": first["covers"].get("controls"),
                   "partial": False, "shards": len(datas)},
        "wall_s": max(float(d.get("wall_s") or 0) for d in datas),
        "git": {"commit": (first.get("git") or {}).get("commit"),
                "dirty": None if None in dirty else any(dirty)},
        "toolchain": next((d["toolchain"] for d in datas if d.get("toolchain")), None),
        "shards": [{"shard": d["covers"]["shard"], "file": Path(path).name, "wall_s": d.get("wall_s"),
                    "created": d.get("created"), "entries": (d["covers"].get("covered") or {}).get("entries"),
                    "controls": (d["covers"].get("covered") or {}).get("controls")} for path, d in shards],
        "summary": summary.line(),
        "exit_code": int(summary.exit_code),
        "counts": dataclasses.asdict(summary),
        "references": _cache_counts(datas, "references"),
        "inputs": _cache_counts(datas, "inputs"),
        "entries": _ordered([e for d in datas for e in d["entries"]], entry_split),
        "controls": _ordered([c for d in datas for c in d["controls"]], control_split),
    }
    if mutation:
        merged["mutation"] = dict(sorted(mutation.items()))
    return merged


def merge_receipts(paths: list[str]) -> dict[str, dict]:
    """The merged receipt of every GPU kind the shards ran on, by kind; refusals as usage errors."""
    if not paths:
        raise UsageError(f"receipt merge: no receipts given; {WHOLE}")
    shards = [(path, read_shard(path)) for path in paths]
    refuse_mixed(shards)
    kinds: dict[str, list[tuple[str, dict]]] = {}
    for path, data in shards:
        kinds.setdefault(gpu_kind(data), []).append((path, data))
    return {kind: merge_kind(complete(kind, group)) for kind, group in sorted(kinds.items())}


def output_paths(template: str, kinds: list[str]) -> dict[str, str]:
    """Where each kind's merged receipt goes: `-o` as given for one kind; `{gpu}` in it names each of several."""
    if "{gpu}" not in template and len(kinds) > 1:
        raise UsageError(f"-o {template}: the shards ran on {len(kinds)} GPU kinds ({', '.join(kinds)}), one "
                         f"receipt each: put {{gpu}} in the name, e.g. -o receipts/contract-{{gpu}}.json")
    return {kind: template.replace("{gpu}", slug(kind)) for kind in kinds}
