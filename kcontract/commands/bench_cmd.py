"""`kcontract bench`: GPU microseconds of each CUDA entry's calls against the read or mma ceiling, peers beside."""

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
from kcontract.provenance import git_state
from kcontract.receipts.carried import carried_bench, entry_source_sha256


def _sizes(given: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """`--size n=1024,8192 --size rows=1` as {"n": (1024, 8192), "rows": (1,)}."""
    sizes = {}
    for text in given:
        name, _, values = text.partition("=")
        try:
            sizes[name.strip()] = tuple(int(x) for x in values.split(",") if x.strip())
        except ValueError:
            values = ""
        if not name.strip() or not values or not sizes.get(name.strip()):
            raise UsageError(f"--size {text}: expected NAME=INTEGERS, e.g. --size n=1024,8192")
    return sizes


@click.command("bench", short_help="GPU time of each kernel call against the read ceiling.")
@contract_option
@click.option("--only", "only", multiple=True, help="Bench entries matching this glob (repeatable).")
@click.option("--size", "size", multiple=True, metavar="NAME=LIST",
              help="A call size the families name, e.g. n=1024,8192 (default: each family's own; repeatable).")
@click.option("--repeat", type=click.IntRange(3, 1000), default=25, show_default=True, help="Timed calls per median.")
@click.option("--json", "json_path", help="Write the rows as JSON.")
@click.option("--receipt", "receipt_path", help="Add the rows to this receipt as `bench`, in place of the benched "
              "entries' rows (other entries' rows stay where their kernel source is unchanged).")
@user_errors
def bench_command(contract_path, only, size, repeat, json_path, receipt_path) -> None:
    """Time every CUDA entry (median of --repeat calls by CUDA events, L2 flushed between) and print the table."""
    sizes = _sizes(size)
    loaded = load_contract(contract_path)
    if receipt_path and not Path(receipt_path).is_file():
        raise UsageError(f"--receipt {receipt_path}: no such receipt; write it with `kcontract run --receipt`")
    entries = [e for e in loaded.entries if e.kernel.cuda is not None and
               (not only or any(fnmatch.fnmatch(e.name, g) for g in only))]
    if not entries:
        raise UsageError("no CUDA entry to bench" + (f" matches --only {' '.join(only)}" if only else ""))
    known = {name for e in entries for name in type(e.family).bench_sizes}
    unknown = sorted(set(sizes) - known)
    if unknown:
        raise UsageError(f"--size {unknown[0]}: the benched families name no such size; they name: "
                         f"{', '.join(sorted(known)) or 'none'}")
    preflight(loaded, contract_path, cuda=True, gpu=True, outputs={"json": json_path}, names=[e.name for e in entries])
    from kcontract.bench.run import bench_entries

    result = bench_entries(loaded, entries, sizes, repeat,
                           lambda line: out.print(line, markup=False, highlight=False))
    if out.is_terminal:
        out.print(bench_table(result["rows"]))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1) + "\n")
    if receipt_path:
        receipt = json.loads(Path(receipt_path).read_text())
        commit = git_state(Path(loaded.path).resolve().parent)["commit"]
        rows = [{**row, "measured_at": commit, "source_sha256": entry_source_sha256(loaded, row["entry"])}
                for row in result["rows"]]
        receipt["bench"] = carried_bench(loaded, receipt, {e.name for e in entries}) + rows
        receipt["bench_ceiling"] = result["ceiling"]
        Path(receipt_path).write_text(json.dumps(receipt, indent=1, sort_keys=True) + "\n")


def bench_table(rows: list[dict]) -> Table:
    """One row per call: time, graph time, GB/s, share of its ceiling (read, or mma when compute-bound), peer."""
    from kcontract.bench.run import size_text

    table = Table(title="bench")
    for col in ("call", "size", "us", "graph us", "GB/s", "ceiling", "TFLOP/s", "peer us"):
        table.add_column(col, overflow="fold", justify="left" if col in ("call", "size") else "right")
    for r in rows:
        table.add_row(Text(r["call"]), Text(size_text(r["size"])), f"{r['us']:.1f}", f"{r['graph_us']:.1f}",
                      f"{r['gbps']:.0f}", (f"{100 * r['mma_ratio']:.0f} % mma" if "mma_ratio" in r
                                           else f"{100 * r['ratio']:.0f} %"), f"{r.get('tflops', 0):.1f}",
                      f"{r['peer_us']:.1f}" if r["peer_us"] is not None else Text(r["peer"]))
    return table
