"""`kcontract bench`: GPU microseconds of each CUDA entry's calls against the read or mma ceiling, peers beside."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from kcontract.commands.common import contract_option, err, out, user_errors
from kcontract.errors import UsageError
from kcontract.session.bench import bench_choice, bench_into_receipt, bench_session, plot_bench, receipt_bench
from kcontract.session.session import Session


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
@click.option("--plot", "plot_dir", help="Write one roofline SVG per family here (matplotlib: kcontract[plot]).")
@click.option("--from-receipt", "from_receipt", help="Plot this receipt's bench rows instead of timing (no GPU).")
@user_errors
def bench_command(contract_path, only, size, repeat, json_path, receipt_path, plot_dir, from_receipt) -> None:
    """Time every CUDA entry (median of --repeat calls by CUDA events, L2 flushed between) and print the table;
    --plot draws the rows as rooflines."""
    sizes = _sizes(size)
    session = Session(contract_path)
    if from_receipt:
        if not plot_dir:
            raise UsageError("--from-receipt draws a receipt's rows: give --plot DIR too")
        _plotted(plot_bench(session.loaded, *receipt_bench(from_receipt), plot_dir))
        return
    entries = bench_choice(session.loaded, only, sizes, receipt_path)
    result = bench_session(session, entries, sizes, repeat, json_path, lambda line: err.print(line, markup=False),
                           lambda line: out.print(line, markup=False, highlight=False))
    if out.is_terminal:
        out.print(bench_table(result["rows"]))
    if receipt_path:
        bench_into_receipt(session.loaded, receipt_path, result, entries)
    if plot_dir:
        _plotted(plot_bench(session.loaded, result["rows"], result["ceiling"], plot_dir))


def _plotted(paths: list) -> None:
    """Say where each family's plot went."""
    for path in paths:
        out.print(f"plot: {path}", markup=False)


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
