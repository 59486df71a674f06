"""`kcontract receipt show|check|merge`: render a receipt as markdown, check that receipts are valid and current,
or join shard receipts into one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kcontract.commands.common import contract_option, out, require_writable, user_errors
from kcontract.contract.loader import load_contract
from kcontract.errors import UsageError
from kcontract.exitcodes import ExitCode
from kcontract.receipts import RECEIPTS_DIR, check_receipts
from kcontract.report.json_report import write_json
from kcontract.report.merge import merge_receipts, output_paths
from kcontract.report.receipt import receipt_markdown


@click.group("receipt", short_help="Show, check or merge run receipts.")
def receipt_group() -> None:
    """Run receipts: show one as pull-request markdown, check them all, or merge shard receipts."""


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
    try:
        receipt = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: not a readable JSON receipt ({error})") from None
    out.print(receipt_markdown(receipt), markup=False)


@receipt_group.command("check")
@contract_option
@user_errors
def check(contract_path: str) -> None:
    """Fail when a receipt beside the contract is stale or invalid, or a CUDA contract has none."""
    report = check_receipts(load_contract(contract_path, import_kernels=False))
    for line in report.stale:
        out.print(f"FAIL {line}", markup=False)
    out.print(f"receipts: {report.summary()}", markup=False)
    sys.exit(int(ExitCode.OK if report.passed else ExitCode.FAILED))


@receipt_group.command("merge")
@click.argument("paths", nargs=-1, type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", required=True,
              help="The merged receipt; with shards of several GPU kinds put {gpu} in it (one receipt per kind).")
@user_errors
def merge(paths: tuple[str, ...], output: str) -> None:
    """Join the receipts of `kcontract run --shard I/N --receipt` into one of the whole contract per GPU kind;
    exit with the merged run's exit code."""
    merged = merge_receipts(list(paths))
    targets = output_paths(output, list(merged))
    for target in targets.values():
        require_writable(output=target)
    codes = []
    for kind, receipt in merged.items():
        write_json(targets[kind], receipt)
        out.print(f"merged {len(receipt['shards'])} shards on {kind} into {targets[kind]}", markup=False)
        out.print(receipt["summary"], markup=False)
        codes.append(receipt["exit_code"])
    sys.exit(next((code for code in codes if code), int(ExitCode.OK)))
