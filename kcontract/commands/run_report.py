"""What `kcontract run` prints, each a listener of the session's run: its notes on stderr, the progress (a bar in
a terminal, a line per gate otherwise), the tables on a terminal and the profile, every failure, GitHub's
annotations and step summary, and the lines of what the summary found beside the failures."""

from __future__ import annotations

from kcontract.commands.common import err, out
from kcontract.gatetable import records_gate
from kcontract.report.github import emit
from kcontract.report.progress import RunProgress
from kcontract.report.tables import control_table, entry_table, print_failures, profile_table
from kcontract.session.listeners import RunListener
from kcontract.session.run_result import RunResult


def run_listeners(session, *, profile: bool, verbose: bool) -> list[RunListener]:
    """Everything the run prints, in the order it prints it."""
    return [Notes(), TaskProgress(), Tables(profile), Failures(verbose), GitHub(session), Findings(session.path)]


class Notes(RunListener):
    """Each note on stderr, as it comes."""

    def on_note(self, line: str) -> None:
        err.print(line, markup=False)


class TaskProgress(RunListener):
    """The tasks as they go (report/progress.py), on stdout (or the console given)."""

    def __init__(self, console=out):
        self.console = console
        self.progress: RunProgress | None = None

    def on_start(self, units: dict[tuple, int]) -> None:
        self.progress = RunProgress(self.console, units).__enter__()

    def on_step(self, step) -> None:
        self.progress.step(step)

    def on_task_done(self, outcome) -> None:
        self.progress.done(outcome)

    def on_stop(self) -> None:
        self.progress.__exit__(None, None, None)


class Tables(RunListener):
    """The entries' and controls' tables on a terminal; with `--profile`, each gate's seconds and memory."""

    def __init__(self, profile: bool):
        self.profile = profile

    def on_result(self, result: RunResult) -> None:
        if out.is_terminal:
            if result.entries:
                out.print(entry_table(result.entries))
            if result.controls:
                out.print(control_table(result.controls, result.planted))
        if self.profile:
            out.print(profile_table(result.entries + result.controls))


class Failures(RunListener):
    """Every failing entry x gate and missed control, with its worst offender and replay command, on stderr
    (`verbose`: tracebacks and every control's evidence)."""

    def __init__(self, verbose: bool):
        self.verbose = verbose

    def on_result(self, result: RunResult) -> None:
        print_failures(err, result.entries, verbose=self.verbose)
        print_failures(err, result.controls, planted=result.planted, verbose=self.verbose)


class GitHub(RunListener):
    """Under GitHub Actions: error annotations and the step summary (report/github.py)."""

    def __init__(self, session):
        self.session = session

    def on_result(self, result: RunResult) -> None:
        emit(self.session.loaded, self.session.path, result.entries, result.controls, result.summary, result.planted)


class Findings(RunListener):
    """What the summary found beside the failures, a line each on stderr: the records gate's notes and toolchain
    findings, a machine that cannot run the kernels, claims the run did not check, known findings that pass."""

    def __init__(self, contract_path: str):
        self.path = contract_path

    def on_result(self, result: RunResult) -> None:
        summary = result.summary
        lines = [f"gate {records_gate().number}: {note}" for note in summary.notes + summary.findings]
        lines += [f"ERROR: this machine cannot run the kernels: {cause}" for cause in summary.environment]
        lines += [f"ERROR: the run did not check what it claims: {why}" for why in summary.unchecked]
        lines += [f"known finding {finding} passes now: remove it from known_findings in {self.path}"
                  for finding in summary.stale_known]
        for line in lines:
            err.print(line, markup=False)
