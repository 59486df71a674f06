"""`kcontract bench`: GPU microseconds of each CUDA entry's calls, GB/s against the read ceiling, torch beside."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from kcontract.commands.common import contract_option, out, user_errors
from kcontract.commands.preflight import preflight
from kcontract.contract.loader import load_contract
from kcontract.errors import UsageError


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{text!r}: expected comma-separated integers, e.g. 1024,8192") from None


@click.command("bench", short_help="GPU time of each kernel call against the read ceiling.")
@contract_option
@click.option("--only", "only", multiple=True, help="Bench entries matching this glob (repeatable).")
@click.option("--keys", default="1024,8192,32768,131072", show_default=True, help="Context lengths.")
@click.option("--rows", default="1,4", show_default=True, help="Rows per call.")
@click.option("--repeat", type=click.IntRange(3, 1000), default=25, show_default=True, help="Timed calls per median.")
@click.option("--json", "json_path", help="Write the rows as JSON.")
@click.option("--receipt", "receipt_path", help="Add the rows to this receipt as `bench`.")
@user_errors
def bench_command(contract_path, only, keys, rows, repeat, json_path, receipt_path) -> None:
    """Time every CUDA entry (median of --repeat calls by CUDA events, L2 flushed between) and print the table."""
    loaded = load_contract(contract_path)
    if receipt_path and not Path(receipt_path).is_file():
        raise UsageError(f"--receipt {receipt_path}: no such receipt; write it with `kcontract run --receipt`")
    entries = [e for e in loaded.entries if e.kernel.cuda is not None and
               (not only or any(fnmatch.fnmatch(e.name, g) for g in only))]
    if not entries:
        raise UsageError("no CUDA entry to bench" + (f" matches --only {' '.join(only)}" if only else ""))
    preflight(loaded, contract_path, cuda=True, gpu=True, outputs={"json": json_path}, names=[e.name for e in entries])
    from kcontract.bench.run import bench_entries

    result = bench_entries(loaded, entries, _ints(keys), _ints(rows), repeat,
                           lambda line: out.print(line, markup=False, highlight=False))
    if out.is_terminal:
        out.print(bench_table(result["rows"]))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1) + "\n")
    if receipt_path:
        receipt = json.loads(Path(receipt_path).read_text())
        receipt["bench"], receipt["bench_ceiling"] = result["rows"], result["ceiling"]
        Path(receipt_path).write_text(json.dumps(receipt, indent=1, sort_keys=True) + "\n")


def bench_table(rows: list[dict]) -> Table:
    """One row per call: time, graph time, GB/s, share of the read ceiling (prompt: of the mma ceiling), torch."""
    table = Table(title="bench")
    for col in ("shape", "rows", "keys", "us", "graph us", "GB/s", "ceiling", "TFLOP/s", "torch us"):
        table.add_column(col, overflow="fold", justify="left" if col == "shape" else "right")
    for r in rows:
        table.add_row(Text(r["shape"]), str(r["rows"]), str(r["keys"]), f"{r['us']:.1f}", f"{r['graph_us']:.1f}",
                      f"{r['gbps']:.0f}", (f"{100 * r['mma_ratio']:.0f} % mma" if "mma_ratio" in r
                                           else f"{100 * r['ratio']:.0f} %"), f"{r.get('tflops', 0):.1f}",
                      f"{r['torch_us']:.1f}" if r["torch_us"] is not None else Text(r["torch"]))
    return table
