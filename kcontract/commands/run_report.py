"""What `kcontract run` prints after its tasks: the tables on a terminal, the profile, every failure, the CI
annotations, and the records' and environment's lines."""

from __future__ import annotations

from kcontract.commands.common import err, out
from kcontract.gatetable import records_gate
from kcontract.report.github import emit
from kcontract.report.tables import control_table, entry_table, print_failures, profile_table


def report_run(session, result, *, profile: bool, verbose: bool) -> None:
    """Everything the run says before its SUMMARY line."""
    summary = result.summary
    if out.is_terminal:
        if result.entries:
            out.print(entry_table(result.entries))
        if result.controls:
            out.print(control_table(result.controls, result.planted))
    if profile:
        out.print(profile_table(result.entries + result.controls))
    print_failures(err, result.entries, verbose=verbose)
    print_failures(err, result.controls, planted=result.planted, verbose=verbose)
    emit(session.loaded, session.path, result.entries, result.controls, summary, result.planted)
    records = records_gate().number
    lines = [f"gate {records}: {note}" for note in summary.notes + summary.findings]
    lines += [f"ERROR: this machine cannot run the kernels: {cause}" for cause in summary.environment]
    lines += [f"ERROR: the run did not check what it claims: {why}" for why in summary.unchecked]
    lines += [f"known finding {finding} passes now: remove it from known_findings in {session.path}"
              for finding in summary.stale_known]
    for line in lines:
        err.print(line, markup=False)
