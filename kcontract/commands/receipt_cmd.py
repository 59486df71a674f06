"""`kcontract receipt show|check`: render a receipt as markdown, or check that receipts are current."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kcontract.commands.common import out, user_errors
from kcontract.errors import UsageError
from kcontract.exitcodes import ExitCode
from kcontract.receipts import RECEIPTS_DIR, check_receipts
from kcontract.report.receipt import receipt_markdown


@click.group("receipt")
def receipt_group() -> None:
    """GPU run receipts."""


@receipt_group.command("show")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@user_errors
def show(path: str | None) -> None:
    """Print a receipt (default: the newest under receipts/) as pull-request markdown."""
    if path is None:
        found = sorted(Path(RECEIPTS_DIR).glob("*.json"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise UsageError(f"no receipts under {RECEIPTS_DIR}/: write one with `kcontract run --receipt FILE`")
        path = str(found[-1])
    try:
        receipt = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: not a readable JSON receipt ({error})") from None
    out.print(receipt_markdown(receipt), markup=False)


@receipt_group.command("check")
@user_errors
def check() -> None:
    """Fail when a receipt names a source whose bytes changed since the run."""
    report = check_receipts(Path.cwd())
    for line in report.stale:
        out.print(f"FAIL {line}", markup=False)
    out.print(f"receipts: {report.summary()}", markup=False)
    sys.exit(int(ExitCode.OK if report.passed else ExitCode.FAILED))
