"""`kcontract records [--update]`: launch records per kernel symbol and SM, and each SM's limits."""

from __future__ import annotations

import sys

import click

from kcontract.commands.common import contract_option, err, out, strict_records_option, user_errors
from kcontract.commands.gate5_text import (
    compile_failures,
    control_lines,
    finding_lines,
    gate5_lines,
    gate5_summary,
    print_limits,
    print_records,
)
from kcontract.commands.preflight import preflight
from kcontract.contract.loader import load_contract
from kcontract.exitcodes import ExitCode
from kcontract.records.gate5 import check_records


@click.command("records", short_help="Gate 5's launch records (--update rewrites).")
@contract_option
@click.option("--update", is_flag=True, help="Rewrite the toolchain's records and records/baseline.json, and print "
                                             "what changed.")
@click.option("--jobs", type=click.IntRange(1, 64), help="Worker processes for cold compiles.")
@strict_records_option
@user_errors
def records_command(contract_path: str, update: bool, jobs: int | None, strict_records: bool) -> None:
    """Show gate 5's launch records against fresh compiles; with --update, rewrite them for the toolchain in use."""
    loaded = load_contract(contract_path)
    preflight(loaded, contract_path, cuda=True, gpu=False)
    report = check_records(loaded, update=update, jobs=jobs, strict=strict_records)
    failures = compile_failures(report.build.failures) if report.build else []
    if update and (report.errors or failures):
        for line in failures + [f"gate 5: {e}" for e in report.errors]:
            out.print(f"FAIL {line}", markup=False)
        err.print("ERROR: records not rewritten: fix the errors above first", markup=False)
        sys.exit(int(ExitCode.FAILED))
    print_limits(out, loaded.targets)
    if report.rows:
        print_records(out, report)
    for line in report.changes if update else []:
        out.print(f"changed: {line}", markup=False)
    if update and not report.changes:
        out.print("records already current", markup=False)
    for line in failures + gate5_lines(report):
        out.print(f"FAIL {line}", markup=False)
    for line in control_lines(report) + finding_lines(report):
        out.print(line, markup=False)
    out.print(f"RECORDS {report.toolchain.id} in {report.root}: {gate5_summary(report)}", markup=False)
    sys.exit(int(ExitCode.OK if report.passed and not failures and not report.missed_controls else ExitCode.FAILED))
