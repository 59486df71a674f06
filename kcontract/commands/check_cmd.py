"""`kcontract check`: everything that needs no GPU, the CPU CI job in one command."""

from __future__ import annotations

import sys

import click

from kcontract.commands.common import Jobs, contract_option, err, out, strict_records_option, user_errors
from kcontract.commands.compiling import CompileProgress
from kcontract.exitcodes import ExitCode
from kcontract.capacity import usable_cores
from kcontract.session.contract_check import check_contract
from kcontract.session.session import Session


@click.command("check", short_help="Everything that needs no GPU (the CPU CI job).")
@contract_option
@click.option("--jobs", type=Jobs(), help="Worker processes for cold compiles, or 'auto' (one per usable core).")
@strict_records_option
@click.option("--strict", "strict_receipts", is_flag=True,
              help="Receipt rows judged by an earlier kcontract (its core or their family changed) fail too.")
@click.option("--recompile", is_flag=True,
              help="Compile every kernel afresh, ignoring the cache, and fail where a cached cubin differs.")
@user_errors
def check_command(contract_path: str, jobs: int | str | None, strict_records: bool, strict_receipts: bool,
                  recompile: bool) -> None:
    """Validate the contract, find unregistered kernels, compile for every SM, run gate 5, check receipts."""
    jobs = usable_cores() if jobs == "auto" else jobs
    session = Session(contract_path, compile_jobs=jobs, progress=CompileProgress(err), recompile=recompile)
    checked = check_contract(session, strict_records, strict_receipts, lambda line: err.print(line, markup=False))
    for line in checked.problems:
        out.print(f"FAIL {line}", markup=False)
    for line in checked.lines:
        out.print(line, markup=False)
    out.print(checked.summary, markup=False)
    sys.exit(int(ExitCode.OK if checked.passed else ExitCode.FAILED))
