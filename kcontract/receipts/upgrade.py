"""`receipt upgrade`: a receipt of the earlier whole-contract form turned into rows, without a GPU.

Each outcome becomes a row that inherits the sha256 the old receipt listed for every file the row uses now (a
file the old receipt did not list makes the row stale), the node its entry or control had in the contract the old
receipt attests (the contract as it is, where its sha256 is the listed one, else the file at the receipt's commit,
checked against that sha256), the old receipt's seed and run, and the old receipt's checker: every row is judged
by an earlier kcontract until a run refreshes it. Mutation scores and bench rows get the sha256 of the kernel
source they measured from the old list, so they carry on as before.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kcontract.contract.paths import resolve_source
from kcontract.contract.yaml_lines import load_yaml
from kcontract.errors import KContractError, UsageError
from kcontract.identity import file_sha256
from kcontract.receipts.depends import digest_of, kernel_files, node_in, relative
from kcontract.receipts.form import KINDS, LISTS, is_receipt, is_rows
from kcontract.receipts.rows import assemble, merged_rows, ran_of, run_id
from kcontract.toolchain.cache import sha256_bytes

UNKNOWN = "not listed by the earlier receipt"


def upgrade(loaded, data: dict, path: str) -> dict:
    """The rows receipt of an earlier-form receipt of this contract (a usage error for anything else)."""
    if not is_receipt(data):
        raise UsageError(f"{path}: not a kcontract receipt (no \"kind\": \"kcontract-run\"): nothing to upgrade")
    if is_rows(data):
        raise UsageError(f"{path}: already has rows: nothing to upgrade")
    if (data.get("covers") or {}).get("shard"):
        raise UsageError(f"{path}: a shard's receipt: upgrade the receipt merged from every shard")
    if data.get("contract") != Path(loaded.path).name:
        raise UsageError(f"{path}: a receipt of {data.get('contract')}, not of {loaded.path}: give --contract the "
                         f"contract it attests")
    sources = data.get("sources") or {}
    raw = _contract_then(loaded, data, sources)
    run = _run(data)
    rows = {}
    for kind in KINDS:
        for outcome in data.get(LISTS[kind]) or []:
            name = (outcome.get("task") or {}).get("name")
            if not _in_contract(loaded, kind, name):
                continue
            rows[(kind, name)] = {**outcome, "task": {**outcome["task"], "kind": kind},
                                  "depends": _depends(loaded, kind, name, raw, data, sources),
                                  "checker": _checker(loaded, kind, name, data.get("checker") or {}),
                                  "ran": ran_of(run) | {k: v for k, v in (outcome.get("kernel") or {}).items()
                                                        if k in ("sm", "toolchain") and v}}
    extra = {key: [_keyed(loaded, item, sources) for item in data[key]] if key == "bench"
             else {n: _keyed(loaded, s, sources) for n, s in data[key].items()} if key == "mutation" else data[key]
             for key in ("mutation", "bench", "bench_ceiling") if data.get(key)}
    receipt = assemble(loaded, merged_rows(loaded, {}, rows), [run], notes=(data.get("counts") or {}).get("notes", []),
                       created=data.get("created"), extra=extra)
    receipt["upgraded"] = {"from": "whole-contract receipt", "created": data.get("created")}
    return receipt


def _in_contract(loaded, kind: str, name: str) -> bool:
    names = [e.name for e in loaded.entries] if kind == "entry" else [c.name for c in loaded.controls]
    return name in names


def _run(data: dict) -> dict:
    """The old receipt's one whole run as a run record."""
    run = {"mode": "whole", "created": data.get("created"), "seed": data.get("seed"), "wall_s": data.get("wall_s"),
           "device": data.get("device"), "git": data.get("git"), "environment": data.get("environment"),
           "toolchain": data.get("toolchain"), "rows": len(data.get("entries") or []) + len(data.get("controls") or []),
           "of": (data.get("covers") or {}).get("entries", 0) + (data.get("covers") or {}).get("controls", 0),
           "references": data.get("references"), "inputs": data.get("inputs")}
    return {"id": run_id(run), **run}


def _contract_then(loaded, data: dict, sources: dict) -> dict | None:
    """The parsed contract the old receipt attests: today's file where its sha256 is the listed one, else the file
    at the receipt's commit where that matches; None where neither does."""
    name = Path(loaded.path).name
    listed = sources.get(name)
    if listed is None:
        return None
    if file_sha256(Path(loaded.path)) == listed:
        return loaded.raw
    commit = (data.get("git") or {}).get("commit")
    text = _file_at(Path(loaded.path).resolve(), commit) if commit else None
    if text is None or sha256_bytes(text) != listed:
        return None
    try:
        parsed = load_yaml(name, text.decode("utf-8")).data
    except (KContractError, UnicodeDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _file_at(path: Path, commit: str) -> bytes | None:
    """A file's bytes at a commit of the git work tree holding it, or None."""
    try:
        top = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=False)
        if top.returncode != 0:
            return None
        rel = path.relative_to(Path(top.stdout.strip()).resolve()).as_posix()
        done = subprocess.run(["git", "-C", str(path.parent), "show", f"{commit}:{rel}"], capture_output=True,
                              check=False)
    except (OSError, ValueError):
        return None
    return done.stdout if done.returncode == 0 else None


def _depends(loaded, kind: str, name: str, raw: dict | None, data: dict, sources: dict) -> dict:
    """The row's dependencies as the old receipt attests them."""
    base = Path(loaded.path).resolve().parent
    subject = loaded.entry(name) if kind == "entry" else loaded.control(name)
    files = {}
    for path in kernel_files(loaded, subject.kernel):
        rel = relative(path, base)
        files[rel] = sources.get(rel, UNKNOWN)
    node = node_in(raw, kind, name) if raw is not None else None
    return {"node": digest_of(node) if node is not None else UNKNOWN, "seed": data.get("seed"),
            "files": dict(sorted(files.items()))}


def _checker(loaded, kind: str, name: str, checker: dict) -> dict:
    """The old receipt's checker, as a row names it."""
    family = (loaded.entry(name if kind == "entry" else loaded.control(name).entry)).family
    return {"version": checker.get("version"), "core": checker.get("sha256"), "family": type(family).name,
            "family_sha256": (checker.get("families") or {}).get(type(family).name)}


def _keyed(loaded, item: dict, sources: dict) -> dict:
    """A mutation score or bench row with the sha256 of its entry's kernel source, from the old list."""
    if item.get("source_sha256"):
        return item
    entry = next((e for e in loaded.entries if e.name == item.get("entry") and e.kernel.cuda is not None), None)
    if entry is None:
        return item
    base = Path(loaded.path).resolve().parent
    rel = relative(resolve_source(base, entry.kernel.cuda.source).resolve(), base)
    return {**item, "source_sha256": sources[rel]} if rel in sources else item
