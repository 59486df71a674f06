"""`kcontract coverage [ENTRY ...]`: which lines and `if` outcomes of each CUDA entry's kernel its cases run."""

from __future__ import annotations

import sys

import click

from kcontract.commands.common import Jobs, contract_option, err, out, user_errors
from kcontract.coverage.report import missed_text, source_gaps
from kcontract.report.progress import RunProgress
from kcontract.session.session import Session
from kcontract.session.line_coverage import CoverageOptions, coverage_session


@click.command("coverage", short_help="Which kernel lines each CUDA entry's cases execute.")
@click.argument("names", nargs=-1, metavar="[ENTRY]...")
@contract_option
@click.option("--sm", help="The SM whose code is instrumented and run (default: the contract's target for this GPU).")
@click.option("--prepare-only", is_flag=True, help="Instrument and compile, report reachable lines; run nothing.")
@click.option("--jobs", "jobs", type=Jobs(), default="auto", show_default=True, help="Workers running stand-ins.")
@click.option("--json", "json_path", help="Write every entry's coverage as JSON.")
@click.option("--receipt", "receipt_path", help="Add each entry's coverage to this receipt under `coverage`.")
@user_errors
def coverage_command(names, contract_path, sm, prepare_only, jobs, json_path, receipt_path) -> None:
    """Instrument each CUDA entry's source with a probe per block and `if` outcome (a patch, as controls are), run
    every case of the entry, and name each line and branch no case executed; entries below their `coverage`
    floor fail."""
    options = CoverageOptions(sm, prepare_only, jobs, json_path, receipt_path)
    covered = coverage_session(Session(contract_path), names, options, lambda line: err.print(line, markup=False),
                               lambda units: RunProgress(out, units))
    campaign = covered.campaign
    for report in covered.reports:
        out.print(_line(report, campaign), markup=False)
        for problem in report.problems + campaign.entries[report.entry].failed:
            out.print(f"  FAIL {problem}", markup=False)
    for label, gaps in source_gaps(campaign, covered.reports).items():
        if gaps and not prepare_only:
            out.print(f"{label}: {len(gaps)} lines no entry executes: {missed_text(campaign.sources[label], gaps)}",
                      markup=False)
    bad = covered.failing()
    out.print(_summary(covered.reports, bad, prepare_only), markup=False)
    sys.exit(1 if bad and not prepare_only else 0)


def _line(report, campaign) -> str:
    """`coverage E (kernels/x.cu): lines 60 of 64 (93.8 %); branches 20 of 24; missed: lines ...`."""
    lines = f"lines {len(report.executed)} of {len(report.reachable) - len(report.argued)}"
    head = f"coverage {report.entry} ({report.source}): "
    if not report.ran:
        return head + f"{len(report.reachable)} lines reachable, {report.branches[1]} branch outcomes (not run)"
    text = head + f"{lines} ({report.pct:.1f} %)"
    if report.argued:
        text += f", {len(report.argued)} argued"
    text += f"; branches {report.branches[0]} of {report.branches[1] - len(report.argued_branches)}"
    if report.argued_branches:
        text += f", {len(report.argued_branches)} argued"
    if report.elsewhere:
        text += f"; {report.elsewhere} lines only other instantiations reach"
    if report.missed:
        text += f"; missed: {missed_text(campaign.sources[report.source], report.missed)}"
    if report.missed_branches:
        text += f"; branches missed: {', '.join(report.missed_branches[:8])}"
    return text


def _summary(reports, bad, prepare_only: bool) -> str:
    """The closing COVERAGE line."""
    reach = sum(len(r.reachable) - len(r.argued) for r in reports)
    done = sum(len(r.executed) for r in reports)
    taken = sum(r.branches[0] for r in reports)
    outcomes = sum(r.branches[1] - len(r.argued_branches) for r in reports)
    if prepare_only:
        return (f"COVERAGE {len(reports)} CUDA entries prepared: {reach} reachable lines, {outcomes} branch outcomes "
                f"(not run)")
    pct = 100.0 * done / reach if reach else 100.0
    return (f"COVERAGE {len(reports)} CUDA entries: lines {done} of {reach} executed ({pct:.1f} %), branches {taken} "
            f"of {outcomes}; {len(bad)} failing (below a floor, an argument that no longer holds, or a stand-in "
            f"that did not run)")
