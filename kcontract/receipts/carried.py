"""Mutation scores, coverage and bench rows kept across runs: keyed by the kernel source they measured and, where
they name it, the entry's node (its split, tile schedule, shape and cases: what instantiates and launches the
kernel), so each stays in the receipt while both are unchanged, marked with the commit it was measured at."""

from __future__ import annotations

from pathlib import Path

from kcontract.contract.paths import resolve_source
from kcontract.identity import file_sha256
from kcontract.receipts.depends import digest_of, node_in
from kcontract.receipts.receipt import Receipt


def carried_mutation(loaded, previous: Receipt) -> dict:
    """A previous receipt's mutation scores whose entry still exists with the same kernel source (the sha256 the
    score names, else the previous receipt's `sources`) and node; each marked with the commit it was measured at."""
    return _carried(loaded, previous, previous.mutation)


def carried_coverage(loaded, previous: Receipt) -> dict:
    """A previous receipt's coverage records kept as its mutation scores are."""
    return _carried(loaded, previous, previous.coverage)


def _carried(loaded, previous: Receipt, records: dict) -> dict:
    """The records (by entry) still measuring the entry as it is, each marked with the commit it was measured at."""
    return {name: {**record, "measured_at": _measured_at(record, previous)} for name, record in records.items()
            if isinstance(record, dict) and _unchanged(loaded, previous, name, record.get("source_sha256"),
                                                       record.get("node_sha256"))}


def carried_bench(loaded, previous: Receipt, replaced: set[str] = frozenset()) -> list[dict]:
    """A previous receipt's bench rows of entries not in `replaced` whose kernel source is unchanged (as for
    mutation scores), each marked with the commit it was measured at."""
    return [{**row, "measured_at": _measured_at(row, previous)} for row in previous.bench
            if row.get("entry") not in replaced and _unchanged(loaded, previous, row.get("entry"),
                                                                row.get("source_sha256"), row.get("node_sha256"))]


def entry_source_sha256(loaded, name: str) -> str | None:
    """The sha256 of a CUDA entry's kernel source, or None for another entry."""
    entry = next((e for e in loaded.entries if e.name == name and e.kernel.compiled is not None), None)
    if entry is None:
        return None
    base = Path(loaded.path).resolve().parent
    return file_sha256(resolve_source(base, entry.kernel.compiled.source))


def entry_node_sha256(loaded, name: str) -> str:
    """The digest of an entry's node as receipt rows depend on it (prose, the coverage floor and argued mutants
    left out)."""
    return digest_of(node_in(loaded.raw, "entry", name))


def measured_for(loaded, name: str) -> dict:
    """What a score or bench row of an entry is keyed by: its kernel source's sha256 and its node's digest."""
    return {"source_sha256": entry_source_sha256(loaded, name), "node_sha256": entry_node_sha256(loaded, name)}


def _unchanged(loaded, previous: Receipt, name: str | None, then: str | None, node: str | None = None) -> bool:
    """The entry still exists with the kernel source it had when measured (`then`, else the previous receipt's
    `sources`, which receipts of the earlier whole-contract form list) and, where the item names it, its node."""
    entry = next((e for e in loaded.entries if e.name == name and e.kernel.compiled is not None), None)
    if entry is None or (node is not None and node != entry_node_sha256(loaded, name)):
        return False
    base = Path(loaded.path).resolve().parent
    source = resolve_source(base, entry.kernel.compiled.source).resolve().relative_to(base).as_posix()
    then = then or previous.sources.get(source)
    return then is not None and then == file_sha256(base / source)


def _measured_at(item: dict, previous: Receipt) -> str | None:
    """The commit a carried score or row was measured at: its own mark, else the previous receipt's commit."""
    return item.get("measured_at") or previous.commit
