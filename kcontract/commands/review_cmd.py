"""`kcontract review`: a kernel pull request's whole receipt against its base branch: what changed, the contract,
and the speed against the base, ABBA."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from kcontract.commands.common import Count, Jobs, contract_option, err, out, require_writable, user_errors
from kcontract.commands.compiling import CompileProgress
from kcontract.commands.run_report import Failures, Findings, Notes, TaskProgress
from kcontract.report.github import add_to_step_summary
from kcontract.report.json_report import write_json
from kcontract.review.document import review_document
from kcontract.review.markdown import review_markdown
from kcontract.review.speed import Settings
from kcontract.review.text import review_text
from kcontract.session.review import ReviewOptions, review

MAX_PERCENT = 1000.0


class Percent(click.ParamType):
    """A percentage from 0 to MAX_PERCENT: `2`, `2.5` or `2.5%`."""

    name = "PCT"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*%?\s*", str(value))
        if m and float(m.group(1)) <= MAX_PERCENT:
            return float(m.group(1))
        self.fail(f"{value!r} is not a percentage: a number from 0 to {MAX_PERCENT:g}, e.g. 2 or 2.5%", param, ctx)


@click.command("review", short_help="A pull request's receipt against its base branch.")
@contract_option
@click.option("--base", "base", required=True, help="The revision to compare against, e.g. origin/main.")
@click.option("--head", "head", default=None, help="The revision to review (default: the working tree).")
@click.option("--markdown", "markdown_path", help="Write the review as markdown (the pull request's receipt).")
@click.option("--json", "json_path", help="Write the review as JSON.")
@click.option("--receipt", "receipt_path",
              help="Write the head's receipt here: the base's with the rows the review re-ran (commit it).")
@click.option("--max-slower", type=Percent(), default="2", show_default=True,
              help="Fail where a call is slower than the base by more than this percent beyond its noise.")
@click.option("--rounds", type=Count(1, 100, "a number of rounds"), default=2, show_default=True,
              help="ABBA rounds per call.")
@click.option("--repeat", type=Count(3, 1000, "a number of timings"), default=25, show_default=True,
              help="CUDA-event timings per slot (their median).")
@click.option("--jobs", "jobs", type=Jobs(), default="auto", show_default=True,
              help="Worker processes for the contract's stale rows, or 'auto'.")
@user_errors
def review_command(contract_path, base, head, markdown_path, json_path, receipt_path, max_slower, rounds, repeat,
                   jobs) -> None:
    """Build both revisions for every SM and compare each kernel's machine code; run the head's rows that are stale
    against the base's receipt; time the changed entries' calls and their current callers' on both builds, ABBA;
    print the review, ending in a REVIEW line (exit 1 where it fails)."""
    require_writable(markdown=markdown_path, json=json_path, receipt=receipt_path)
    options = ReviewOptions(contract_path, base, head, Settings(rounds, repeat, max_slower), jobs, receipt_path)
    listeners = [Notes(), TaskProgress(err), Failures(verbose=False), Findings(contract_path)]
    found = review(options, listeners=listeners, say=lambda line: err.print(line, markup=False),
                   progress=CompileProgress(err))
    markdown = review_markdown(found)
    if markdown_path:
        Path(markdown_path).write_text(markdown)
    if json_path:
        write_json(json_path, review_document(found))
    add_to_step_summary(markdown)
    for line in review_text(found):
        out.print(line, markup=False)
    sys.exit(found.exit_code)
