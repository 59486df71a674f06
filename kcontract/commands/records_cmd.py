"""`kcontract records [--update]`: launch records per kernel symbol and SM, and each SM's limits."""

from __future__ import annotations

import sys

import click

from kcontract.commands.common import contract_option, err, out, strict_records_option, user_errors
from kcontract.report.records_text import (
    compile_failures,
    control_lines,
    finding_lines,
    records_lines,
    records_summary,
    print_limits,
    print_records,
)
from kcontract.errors import UsageError
from kcontract.exitcodes import ExitCode
from kcontract.records.record_check import check_records
from kcontract.session.session import Session


@click.command("records", short_help="Gate 5's launch records (--update rewrites).")
@contract_option
@click.option("--update", is_flag=True, help="Rewrite the toolchain's records and records/baseline.json, and print "
                                             "what changed.")
@click.option("--accept-limit-problems", "accept_limits", is_flag=True,
              help="With --update: add new limit problems (spills, illegal launches) to the baseline.")
@click.option("--jobs", type=click.IntRange(1, 64), help="Worker processes for cold compiles.")
@strict_records_option
@user_errors
def records_command(contract_path: str, update: bool, accept_limits: bool, jobs: int | None,
                    strict_records: bool) -> None:
    """Show gate 5's launch records against fresh compiles; with --update, rewrite them for the toolchain in use."""
    _needs_update(update, accept_limits)
    session = Session(contract_path)
    session.machine(cuda=True, gpu=False, say=lambda line: err.print(line, markup=False))
    report = check_records(session.loaded, update=update, jobs=jobs, strict=strict_records,
                           accept_limits=accept_limits)
    failures = compile_failures(report.build.failures) if report.build else []
    if update and (report.errors or failures):
        _refuse_update(report, failures)
    _show(report, session.loaded.targets, update, failures)
    _note_unaccepted(report)
    tools = ", ".join(report.toolchains) or report.toolchain.id
    out.print(f"RECORDS {tools} in {report.root}: {records_summary(report)}", markup=False)
    passed = report.passed and not failures and not report.missed_controls
    sys.exit(int(ExitCode.OK if passed else ExitCode.FAILED))


def _needs_update(update: bool, accept_limits: bool) -> None:
    """--accept-limit-problems only beside --update, which writes the baseline it adds to."""
    if accept_limits and not update:
        raise UsageError("--accept-limit-problems adds to the baseline that --update rewrites: add --update")


def _note_unaccepted(report) -> None:
    """Say which new limit problems --update left out of the baseline, and how to accept them."""
    if report.unaccepted:
        err.print(f"note: records/baseline.json left without {len(report.unaccepted)} new limit problems: fix the "
                  f"kernel, or accept them with `kcontract records --update --accept-limit-problems`", markup=False)


def _show(report, targets: list[str], update: bool, failures: list[str]) -> None:
    """The SMs' limits, the records, what --update changed, what fails, the controls and findings."""
    print_limits(out, targets)
    if report.rows:
        print_records(out, report)
    for line in _changes(report) if update else []:
        out.print(line, markup=False)
    for line in failures + records_lines(report):
        out.print(f"FAIL {line}", markup=False)
    for line in control_lines(report) + finding_lines(report):
        out.print(line, markup=False)


def _refuse_update(report, failures: list[str]) -> None:
    """Say what stops `--update` and exit failed: nothing is rewritten."""
    for line in failures + [f"gate 5: {e}" for e in report.errors]:
        out.print(f"FAIL {line}", markup=False)
    err.print("ERROR: records not rewritten: fix the errors above first", markup=False)
    sys.exit(int(ExitCode.FAILED))


def _changes(report) -> list[str]:
    """What `--update` rewrote, a line each, or that the records were current."""
    return [f"changed: {line}" for line in report.changes] or ["records already current"]
