"""`Receipt`: the one door to a receipt file (its schema: receipts/schema.py).

It reads a file (a one-line usage error for one that is missing, unreadable, no JSON, no kcontract receipt or of a
newer format), answers for each field as its type (a list or mapping of another type reads as empty, so a damaged
field judges stale rather than failing), takes rows, bench rows, mutation scores and coverage records, joins the
receipts of one run's shards, and writes the file whole (readers never see part of it) under the lock every
writer of that receipt holds. Unknown fields and a row's every key are kept as they are, so a receipt read and
written again is the same file.
"""

from __future__ import annotations

import copy
import dataclasses
import fcntl
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kcontract.atomicfile import write_atomic
from kcontract.errors import UsageError
from kcontract.receipts.rows import kept_runs, merged_rows, now, rows_summary
from kcontract.receipts.schema import CONTAINERS, FORMAT, KIND, KINDS, LISTS, RUN_FACTS, lock_of, row_key

GIVE = "give a receipt `kcontract run --receipt` wrote"


class ReceiptError(UsageError):
    """A file that cannot be read as a receipt: `reason` says why; the message says where and what to do."""

    def __init__(self, path: str | Path, reason: str, advice: str = GIVE):
        super().__init__(f"{path}: {reason}; {advice}")
        self.path, self.reason, self.advice = str(path), reason, advice


class ReceiptMissing(ReceiptError):
    """No file at the path."""


class ReceiptUnreadable(ReceiptError):
    """A file that cannot be read, or holds no JSON."""


class NotAReceipt(ReceiptError):
    """JSON that is no kcontract receipt (no `"kind": "kcontract-run"`)."""


class NewerReceipt(ReceiptError):
    """A receipt of a format newer than this kcontract reads."""


class _Field:
    """A top-level field of the receipt: a list or mapping (schema.CONTAINERS) as its type, its empty value where
    absent or of another type; any other field as it is, None where absent."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, receipt: Receipt | None, owner: type | None = None):
        if receipt is None:
            return self
        value = receipt._data.get(self.key)
        kind = CONTAINERS.get(self.key)
        return value if kind is None or isinstance(value, kind) else kind()


class Receipt:
    """One receipt's document: read, its fields and rows, puts, a merge of shards, written under its lock."""

    kind: str | None = _Field()
    format: int | None = _Field()
    contract: str | None = _Field()
    created: str | None = _Field()
    updated: str | None = _Field()
    seed: int | None = _Field()
    device: str | None = _Field()
    wall_s: float | None = _Field()
    summary: str | None = _Field()
    exit_code: int | None = _Field()
    toolchain: dict | None = _Field()
    entries: list = _Field()
    controls: list = _Field()
    runs: list[dict] = _Field()
    bench: list[dict] = _Field()
    bench_ceiling: dict = _Field()
    mutation: dict[str, dict] = _Field()
    coverage: dict[str, dict] = _Field()
    covers: dict = _Field()
    counts: dict = _Field()
    git: dict = _Field()
    environment: dict = _Field()
    notes: list[str] = _Field()
    shards: list[dict] = _Field()
    planted: dict = _Field()
    sources: dict[str, str] = _Field()  # the earlier whole-contract form's: sha256 of every file its run read
    checker: dict = _Field()  # the earlier form's: the checker of the whole run
    references: dict | None = _Field()  # the earlier form's: how its references were made
    inputs: dict | None = _Field()  # the earlier form's: how its inputs were drawn

    def __init__(self, data: dict | None = None):
        self._data = data if isinstance(data, dict) else {}

    def __repr__(self) -> str:
        return f"Receipt({self.contract!r}, {len(self.entries)} entries, {len(self.controls)} controls)"

    # The file.

    @classmethod
    def read(cls, path: str | Path) -> Receipt:
        """The receipt at `path`, of this format or the earlier whole-contract one; a ReceiptError (one line)
        for a file that is missing, unreadable, no JSON, no kcontract receipt or of a newer format."""
        data = _parsed(path)
        receipt = cls(data)
        if not receipt.is_receipt:
            raise NotAReceipt(path, f"not a kcontract receipt (no \"kind\": \"{KIND}\")")
        if receipt.is_newer:
            raise NewerReceipt(path, f"a receipt of format {receipt.format}, newer than this kcontract's format "
                                     f"{FORMAT}", "upgrade kcontract to read it")
        return receipt

    @classmethod
    @contextmanager
    def updating(cls, path: str | Path) -> Iterator[Receipt]:
        """The receipt at `path`, read and written back under its lock when the block ends without error: commands
        running side by side (mutation campaigns) each add their part to the file."""
        with _locked(Path(path)):
            receipt = cls.read(path)
            yield receipt
            receipt._put(Path(path))

    def write(self, path: str | Path) -> None:
        """Write the receipt to `path` whole, under its lock, making its folder."""
        path = Path(path)
        with _locked(path):
            self._put(path)

    def _put(self, path: Path) -> None:
        """Replace the file at `path` by the receipt's text, whole; its lock is held."""
        try:
            write_atomic(path, self.text().encode())
        except OSError as error:
            raise ReceiptError(path, f"cannot write it ({error.strerror})", "make it and its folder writable") from None

    def text(self) -> str:
        """The file's text: JSON, sorted by name, one space of indent."""
        return json.dumps(self._data, indent=1, sort_keys=True) + "\n"

    def to_dict(self) -> dict:
        """A copy of the document, as JSON reads it."""
        return copy.deepcopy(self._data)

    # What kind of receipt.

    @property
    def is_receipt(self) -> bool:
        """A kcontract receipt of any format."""
        return self.kind == KIND

    @property
    def has_rows(self) -> bool:
        """A receipt of this format: rows."""
        return self.is_receipt and self.format == FORMAT

    @property
    def is_earlier(self) -> bool:
        """A receipt of the earlier whole-contract form (no format)."""
        return self.is_receipt and not isinstance(self.format, int)

    @property
    def is_newer(self) -> bool:
        """A receipt of a format newer than this kcontract's."""
        return isinstance(self.format, int) and self.format > FORMAT

    @property
    def shard(self) -> str | None:
        """`I/N` where the receipt covers one shard of its contract."""
        return self.covers.get("shard") or None

    @property
    def is_shard(self) -> bool:
        """Whether the receipt covers one shard of its contract."""
        return bool(self.shard)

    @property
    def commit(self) -> str | None:
        """The commit of the run the receipt's facts are from."""
        return self.git.get("commit")

    def lacks(self, *fields: str) -> list[str]:
        """The fields among `fields` that are absent or not of their type."""
        return [f for f in fields if not isinstance(self._data.get(f), CONTAINERS[f])]

    # Rows and what is measured beside them.

    def row_list(self, kind: str) -> list:
        """The rows of one kind ("entry" or "control") as the file lists them."""
        return self.entries if kind == "entry" else self.controls

    def rows(self) -> dict[tuple[str, str], dict]:
        """The rows by (kind, name), entries first, in file order."""
        return {row_key(row): row for kind in KINDS for row in self.row_list(kind) if isinstance(row, dict)}

    def row(self, kind: str, name: str) -> dict | None:
        """One row, or None."""
        return self.rows().get((kind, name))

    def mutation_of(self, entry: str) -> dict | None:
        """An entry's mutation score, or None."""
        score = self.mutation.get(entry)
        return score if isinstance(score, dict) else None

    def coverage_of(self, entry: str) -> dict | None:
        """An entry's coverage record, or None."""
        record = self.coverage.get(entry)
        return record if isinstance(record, dict) else None

    # Puts.

    def put_rows(self, loaded, rows: dict[tuple[str, str], dict], runs: list[dict], *, notes: Iterable[str] = (),
                 covers: dict | None = None, created: str | None = None) -> Receipt:
        """These rows (in the contract's order, as rows.merged_rows gives them), the runs that still own a row or
        time the whole contract (rows.kept_runs), the last run's facts and the SUMMARY of every row."""
        notes = list(notes)
        owners = {row.get("ran", {}).get("run") for row in rows.values()}
        runs = kept_runs(runs, owners)
        last = next((run for run in reversed(runs) if run["id"] in owners), {})
        summary = rows_summary(loaded, rows, notes)
        whole = {"entries": len(loaded.entries), "controls": len(loaded.controls),
                 "partial": bool((covers or {}).get("shard"))}
        self._data.update({
            "kind": KIND, "format": FORMAT, "contract": Path(loaded.path).name, "created": created or now(),
            "updated": now(), "seed": loaded.seed, "covers": whole | (covers or {}),
            **{fact: last.get(fact) for fact in RUN_FACTS}, "runs": runs,
            "summary": summary.line(), "exit_code": int(summary.exit_code), "counts": dataclasses.asdict(summary),
            "planted": {c.name: c.gate for c in loaded.controls}, "notes": notes,
            **{LISTS[kind]: [row for (k, _), row in rows.items() if k == kind] for kind in KINDS}})
        return self

    def put_bench(self, rows: list[dict], ceiling: dict) -> None:
        """The bench rows and the ceilings they are measured against, in place of those there."""
        self._data["bench"], self._data["bench_ceiling"] = rows, ceiling

    def put_mutation(self, scores: dict[str, dict]) -> None:
        """Mutation scores by entry, over those of the same entries."""
        if scores:
            self._data["mutation"] = {**self.mutation, **scores}

    def put_coverage(self, records: dict[str, dict]) -> None:
        """Coverage records by entry, over those of the same entries."""
        if records:
            self._data["coverage"] = {**self.coverage, **records}

    def put_upgraded(self, created: str | None) -> None:
        """Mark the receipt as turned into rows from one of the earlier form, created then."""
        self._data["upgraded"] = {"from": "whole-contract receipt", "created": created}

    # A merge.

    @classmethod
    def merge(cls, loaded, shards: list[tuple[str, Receipt]]) -> Receipt:
        """One receipt of the whole contract from one GPU kind's complete shards (ordered 1..N, checked by
        receipts/merge.py): their rows joined by the row merge every writer uses, the SUMMARY recomputed from them,
        the longest shard's wall_s, each shard's own facts under `shards`; a score of an entry the first shard
        that has one."""
        parts = [receipt for _, receipt in shards]
        rows: dict = {}
        for part in parts:
            rows = merged_rows(loaded, rows, part.rows())
        notes = dict.fromkeys(note for part in parts for note in part.notes)
        merged = cls().put_rows(loaded, rows, [run for part in parts for run in part.runs], notes=notes,
                                covers={"shards": len(parts)})
        merged._data |= {"wall_s": max(float(part.wall_s or 0) for part in parts), "git": _merged_git(parts),
                         "shards": [part._as_shard(path) for path, part in shards]}
        merged.put_mutation(_first_wins(part.mutation for part in parts))
        merged.put_coverage(_first_wins(part.coverage for part in parts))
        if parts[0].bench:
            merged.put_bench(parts[0].bench, parts[0].bench_ceiling)
        return merged

    def _as_shard(self, path: str) -> dict:
        """What a merged receipt keeps of one of its shards."""
        covered = self.covers.get("covered") or {}
        return {"shard": self.shard, "file": Path(path).name, "wall_s": self.wall_s, "created": self.created,
                "entries": covered.get("entries"), "controls": covered.get("controls")}


def _parsed(path: str | Path):
    """The JSON in the file at `path`; a ReceiptError where there is none, it cannot be read or is no JSON."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ReceiptMissing(path, "no such file") from None
    except OSError as error:
        raise ReceiptUnreadable(path, f"cannot read it ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise ReceiptUnreadable(path, f"not valid JSON (not UTF-8 text at byte {error.start})") from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise ReceiptUnreadable(path, f"not valid JSON ({error})") from None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the receipt's lock file (beside it, its folder made) for the block; every write of the receipt holds
    it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(lock_of(path), "w")
    except OSError as error:
        raise ReceiptError(path, f"cannot lock it ({error.strerror})", "make its folder writable") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _merged_git(parts: list[Receipt]) -> dict:
    """The shards' commit; dirty where any shard's tree was, unknown where any shard's is."""
    dirty = [part.git.get("dirty") for part in parts]
    return {"commit": parts[0].commit, "dirty": None if any(d is None for d in dirty) else any(dirty)}


def _first_wins(mappings: Iterable[dict]) -> dict:
    """The mappings joined, the first to name a key keeping it; sorted by key."""
    kept: dict = {}
    for mapping in mappings:
        kept = {**mapping, **kept}
    return dict(sorted(kept.items()))
