"""`kcontract receipt show|check|merge|upgrade|argue`: render a receipt as markdown, judge receipts row by row, join
shard receipts into one, turn a receipt of the earlier whole-contract form into rows, or judge its mutation scores
again under the contract's arguments."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from kcontract.commands.common import contract_option, out, require_writable, user_errors
from kcontract.errors import UsageError
from kcontract.exitcodes import ExitCode
from kcontract.receipts.currency import check_receipts
from kcontract.receipts.merge import merge_receipts, output_paths
from kcontract.receipts.plots import receipt_plots, redraw_command
from kcontract.receipts.receipt import Receipt, ReceiptError
from kcontract.receipts.schema import RECEIPTS_DIR
from kcontract.receipts.upgrade import upgrade as upgraded
from kcontract.report.receipt import receipt_markdown
from kcontract.session.session import Session


@click.group("receipt", short_help="Show, check, merge or upgrade run receipts.")
def receipt_group() -> None:
    """Run receipts: show one as pull-request markdown, judge them row by row, merge shard receipts, or upgrade
    one of the earlier whole-contract form."""


@receipt_group.command("show")
@contract_option
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@user_errors
def show(contract_path: str, path: str | None) -> None:
    """Print a receipt (default: the newest beside the contract) as pull-request markdown."""
    if path is None:
        folder = Path(contract_path).resolve().parent / RECEIPTS_DIR
        found = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
        if not found:
            raise UsageError(f"no receipts under {folder}: write one with `kcontract run --receipt FILE`")
        path = str(found[-1])
    receipt = Receipt.read(path)
    base = Path(contract_path).resolve().parent
    plots = [(Path(os.path.relpath(svg.resolve(), base)).as_posix(), current)
             for svg, current in receipt_plots(Path(path), receipt)]
    out.print(receipt_markdown(receipt, plots, redraw_command(path)), markup=False)


strict_option = click.option("--strict", is_flag=True,
                             help="Rows judged by an earlier kcontract (its core or their family changed) fail too.")


@receipt_group.command("check")
@contract_option
@strict_option
@user_errors
def check(contract_path: str, strict: bool) -> None:
    """Judge every receipt beside the contract row by row: stale, missing, orphaned or failed rows fail."""
    report = check_receipts(_contract(contract_path), strict=strict)
    for line in report.problems:
        out.print(f"FAIL {line}", markup=False)
    for line in report.notes:
        out.print(f"note: {line}", markup=False)
    out.print(f"receipts: {report.summary()}", markup=False)
    sys.exit(int(ExitCode.OK if report.passed else ExitCode.FAILED))


@receipt_group.command("merge")
@contract_option
@click.argument("paths", nargs=-1, type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", required=True,
              help="The merged receipt; with shards of several GPU kinds put {gpu} in it (one receipt per kind).")
@user_errors
def merge(contract_path: str, paths: tuple[str, ...], output: str) -> None:
    """Join the receipts of `kcontract run --shard I/N --receipt` into one of the whole contract per GPU kind;
    exit with the merged run's exit code."""
    merged = merge_receipts(_contract(contract_path), list(paths))
    targets = output_paths(output, list(merged))
    for target in targets.values():
        require_writable(output=target)
    codes = []
    for kind, receipt in merged.items():
        receipt.write(targets[kind])
        out.print(f"merged {len(receipt.shards)} shards on {kind} into {targets[kind]}", markup=False)
        out.print(receipt.summary, markup=False)
        codes.append(receipt.exit_code)
    sys.exit(next((code for code in codes if code), int(ExitCode.OK)))


@receipt_group.command("upgrade")
@contract_option
@click.argument("paths", nargs=-1, type=click.Path(dir_okay=False))
@user_errors
def upgrade(contract_path: str, paths: tuple[str, ...]) -> None:
    """Turn receipts of the earlier whole-contract form into rows, in place (default: every such receipt of the
    contract under receipts/); no GPU needed."""
    loaded = _contract(contract_path)
    if not paths:
        folder = Path(contract_path).resolve().parent / RECEIPTS_DIR
        paths = tuple(os.path.relpath(p) for p in sorted(folder.glob("*.json")) if _earlier_of(p, loaded))
        if not paths:
            raise UsageError(f"no receipt of the earlier form for {contract_path} under {folder}: nothing to upgrade")
    receipts = {path: upgraded(loaded, Receipt.read(path), path) for path in paths}
    for path, receipt in receipts.items():
        require_writable(receipt=path)
        receipt.write(path)
        rows = len(receipt.entries) + len(receipt.controls)
        out.print(f"upgraded {path}: {rows} rows, each judged by the kcontract that made the receipt; `kcontract "
                  f"receipt check` judges them", markup=False)


@receipt_group.command("argue")
@contract_option
@click.argument("path", type=click.Path(dir_okay=False))
@user_errors
def argue(contract_path: str, path: str) -> None:
    """Judge the receipt's mutation scores again under the contract's `mutation.equivalent` arguments, in place:
    no GPU, and only scores whose kernel source is the one measured."""
    if not Receipt.read(path).mutation:
        raise UsageError(f"{path}: no mutation scores; `kcontract mutate ENTRY --receipt {path}` writes them")
    loaded = _contract(contract_path)
    require_writable(receipt=path)
    with Receipt.updating(path) as receipt:  # written before printing: a reader that closes the pipe early
        judged = [_reargued(loaded, receipt, name, path) for name in sorted(receipt.mutation)]
    for what in judged:
        verdict = f"left as it was: {what.skipped}" if what.skipped else f"{what.before} % -> {what.after} %"
        out.print(f"argue {what.entry}: {verdict}", markup=False)


def _contract(contract_path: str):
    """The contract, loaded through a session; its Python kernels are not imported (a receipt's rows need them
    not)."""
    return Session(contract_path, import_kernels=False).loaded


def _reargued(loaded, receipt: Receipt, name: str, path: str):
    """One entry's mutation score judged again and put back in the receipt; what changed."""
    from kcontract.mutate.reargue import reargue

    try:
        score, what = reargue(loaded, receipt.mutation[name])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(f"{path}: the mutation score of {name} is malformed ({type(error).__name__}: {error}); "
                         f"write it again with `kcontract mutate {name} --receipt {path}`") from None
    receipt.put_mutation({name: score})
    return what


def _earlier_of(path: Path, loaded) -> bool:
    """Whether a file is a receipt of the earlier form for this contract."""
    try:
        receipt = Receipt.read(path)
    except ReceiptError:
        return False
    return receipt.is_earlier and receipt.contract == Path(loaded.path).name
