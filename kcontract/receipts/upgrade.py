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
from kcontract.receipts.receipt import Receipt
from kcontract.receipts.rows import merged_rows, ran_of, run_id
from kcontract.receipts.schema import KINDS
from kcontract.toolchain.cache import sha256_bytes

UNKNOWN = "not listed by the earlier receipt"


def upgrade(loaded, earlier: Receipt, path: str) -> Receipt:
    """The rows receipt of an earlier-form receipt of this contract (a usage error for anything else)."""
    _refuse(loaded, earlier, path)
    run = _run(earlier)
    rows = _rows(loaded, earlier, run)
    receipt = Receipt().put_rows(loaded, merged_rows(loaded, {}, rows), [run], notes=earlier.counts.get("notes", []),
                                 created=earlier.created)
    receipt.put_mutation({name: _keyed(loaded, score, earlier.sources) for name, score in earlier.mutation.items()})
    if earlier.bench:
        receipt.put_bench([_keyed(loaded, row, earlier.sources) for row in earlier.bench], earlier.bench_ceiling)
    receipt.put_upgraded(earlier.created)
    return receipt


def _refuse(loaded, earlier: Receipt, path: str) -> None:
    """A usage error where the receipt is no earlier-form receipt of the whole contract `loaded`."""
    if earlier.has_rows:
        raise UsageError(f"{path}: already has rows: nothing to upgrade")
    if earlier.is_shard:
        raise UsageError(f"{path}: a shard's receipt: upgrade the receipt merged from every shard")
    if earlier.contract != Path(loaded.path).name:
        raise UsageError(f"{path}: a receipt of {earlier.contract}, not of {loaded.path}: give --contract the "
                         f"contract it attests")


def _rows(loaded, earlier: Receipt, run: dict) -> dict[tuple[str, str], dict]:
    """Each outcome of the earlier receipt whose entry or control the contract still has, as a row that inherits
    the old receipt's file hashes, node, checker and run."""
    raw = _contract_then(loaded, earlier)
    rows = {}
    for kind in KINDS:
        for outcome in earlier.row_list(kind):
            name = (outcome.get("task") or {}).get("name")
            if _in_contract(loaded, kind, name):
                rows[(kind, name)] = {**outcome, "task": {**outcome["task"], "kind": kind},
                                      "depends": _depends(loaded, kind, name, raw, earlier),
                                      "checker": _checker(loaded, kind, name, earlier.checker),
                                      "ran": ran_of(run) | {k: v for k, v in (outcome.get("kernel") or {}).items()
                                                            if k in ("sm", "toolchain") and v}}
    return rows


def _in_contract(loaded, kind: str, name: str) -> bool:
    names = [e.name for e in loaded.entries] if kind == "entry" else [c.name for c in loaded.controls]
    return name in names


def _run(earlier: Receipt) -> dict:
    """The old receipt's one whole run as a run record."""
    run = {"mode": "whole", "created": earlier.created, "seed": earlier.seed, "wall_s": earlier.wall_s,
           "device": earlier.device, "git": earlier.git, "environment": earlier.environment,
           "toolchain": earlier.toolchain, "rows": len(earlier.entries) + len(earlier.controls),
           "of": earlier.covers.get("entries", 0) + earlier.covers.get("controls", 0),
           "references": earlier.references, "inputs": earlier.inputs}
    return {"id": run_id(run), **run}


def _contract_then(loaded, earlier: Receipt) -> dict | None:
    """The parsed contract the old receipt attests: today's file where its sha256 is the listed one, else the file
    at the receipt's commit where that matches; None where neither does."""
    name = Path(loaded.path).name
    listed = earlier.sources.get(name)
    if listed is None:
        return None
    if file_sha256(Path(loaded.path)) == listed:
        return loaded.raw
    commit = earlier.commit
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


def _depends(loaded, kind: str, name: str, raw: dict | None, earlier: Receipt) -> dict:
    """The row's dependencies as the old receipt attests them."""
    base = Path(loaded.path).resolve().parent
    subject = loaded.entry(name) if kind == "entry" else loaded.control(name)
    files = {}
    for path in kernel_files(loaded, subject.kernel):
        rel = relative(path, base)
        files[rel] = earlier.sources.get(rel, UNKNOWN)
    node = node_in(raw, kind, name) if raw is not None else None
    return {"node": digest_of(node) if node is not None else UNKNOWN, "seed": earlier.seed,
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
    entry = next((e for e in loaded.entries if e.name == item.get("entry") and e.kernel.compiled is not None), None)
    if entry is None:
        return item
    base = Path(loaded.path).resolve().parent
    rel = relative(resolve_source(base, entry.kernel.compiled.source).resolve(), base)
    return {**item, "source_sha256": sources[rel]} if rel in sources else item
