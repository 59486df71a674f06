"""`kcontract bench` as a session step: the CUDA entries chosen and checked, benched, and the rows written;
nothing printed here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from kcontract.errors import UsageError
from kcontract.session.plan import picked
from kcontract.receipts.carried import carried_bench, measured_for
from kcontract.receipts.receipt import Receipt, ReceiptError
from kcontract.session.outputs import measured_at, require_receipt


def bench_choice(loaded, only: tuple[str, ...], sizes: dict[str, tuple[int, ...]], receipt: str | None) -> list:
    """The CUDA entries `--only` picks (all by default), with `--size` names their families know."""
    require_receipt(receipt)
    entries = [e for e in loaded.entries if e.kernel.compiled is not None and picked(e.name, only)]
    if not entries:
        raise UsageError("no CUDA entry to bench" + (f" matches --only {' '.join(only)}" if only else ""))
    _refuse_unknown_sizes(entries, sizes)
    return entries


def _refuse_unknown_sizes(entries: list, sizes: dict[str, tuple[int, ...]]) -> None:
    """A `--size` name that none of the benched families names is a usage error listing those they do."""
    known = {name for e in entries for name in type(e.family).bench_sizes}
    unknown = sorted(set(sizes) - known)
    if unknown:
        raise UsageError(f"--size {unknown[0]}: the benched families name no such size; they name: "
                         f"{', '.join(sorted(known)) or 'none'}")


def bench_session(session, entries: list, sizes: dict[str, tuple[int, ...]], repeat: int, json_path: str | None,
                  say: Callable[[str], None], progress: Callable[[str], None]) -> dict:
    """Check the machine, time every entry's calls (`progress` hears each line), write the JSON; the result."""
    session.machine(cuda=True, gpu=True, outputs={"json": json_path}, names=[e.name for e in entries], say=say)
    from kcontract.bench.run import bench_entries

    result = bench_entries(session.loaded, entries, sizes, repeat, progress)
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1) + "\n")
    return result


def bench_into_receipt(loaded, receipt_path: str, result: dict, entries: list) -> None:
    """The rows into the receipt as `bench`, in place of the benched entries' rows; other entries' rows stay where
    their kernel source is unchanged."""
    commit = measured_at(loaded)
    rows = [{**row, "measured_at": commit, **measured_for(loaded, row["entry"])} for row in result["rows"]]
    with Receipt.updating(receipt_path) as receipt:
        receipt.put_bench(carried_bench(loaded, receipt, {e.name for e in entries}) + rows, result["ceiling"])


def plot_bench(loaded, rows: list[dict], ceiling: dict, folder: str) -> list[Path]:
    """One roofline SVG per family of the rows' entries under `folder`."""
    from kcontract.bench.plot import plot_rows

    if not rows:
        raise UsageError("--plot: no bench rows to draw")
    return plot_rows(rows, {e.name: e.family_name for e in loaded.entries}, ceiling, Path(folder))


def receipt_bench(path: str) -> tuple[list[dict], dict]:
    """A receipt's bench rows and ceilings, to plot without a GPU."""
    try:
        receipt = Receipt.read(path)
    except ReceiptError as error:
        raise UsageError(f"--from-receipt {path}: not a readable receipt ({error.reason})") from None
    if not receipt.bench:
        raise UsageError(f"--from-receipt {path}: the receipt has no bench rows; run `kcontract bench --receipt "
                         f"{path}` on a GPU first")
    return receipt.bench, receipt.bench_ceiling
