"""`kcontract run`: every entry through its gates, every control, then the SUMMARY line."""

from __future__ import annotations

import sys

import click

from kcontract.commands.common import Count, Jobs, contract_option, err, out, strict_records_option, user_errors
from kcontract.commands.compiling import CompileProgress
from kcontract.commands.run_report import run_listeners
from kcontract.commands.sanitize_mode import sanitize_run
from kcontract.gatetable import NUMBERS
from kcontract.session.options import RunOptions
from kcontract.session.plan import Selection
from kcontract.session.session import Session
from kcontract.session.shard import parse_shard
from kcontract.session.writers import writers


@click.command("run", short_help="Run every gate and control; print SUMMARY.")
@contract_option
@click.option("--only", "only", multiple=True, help="Run entries matching this glob (repeatable).")
@click.option("--control", "control_names", multiple=True, help="Run only this control (repeatable).")
@click.option("--gate", "gate", type=click.IntRange(min(NUMBERS), max(NUMBERS)), help="Run only this gate.")
@click.option("--case", "case", help="Run only this case: NAME in every gate that has it, or one gate's case as "
                                     "replay commands name it (exact/NAME).")
@click.option("--seed", "seed", type=Count(0, 2**63 - 1, "a seed"), help="Override the contract's seed.")
@click.option("--no-controls", is_flag=True, help="Skip the planted-fault controls.")
@click.option("--jobs", "jobs", type=Jobs(), default="auto", show_default=True,
              help="Worker processes running entries side by side, or 'auto'.")
@click.option("--json", "json_path", help="Write the full results as JSON.")
@click.option("--junit", "junit_path", help="Write JUnit XML for CI dashboards.")
@click.option("--shard", "shard_text", metavar="I/N",
              help="Run shard I of N: whole entries with their controls, balanced by recorded seconds.")
@click.option("--receipt", "receipt_path",
              help="Write a receipt of the whole contract, or of a shard (merge them: `kcontract receipt merge`).")
@click.option("--stale", is_flag=True,
              help="Run only the receipt's rows that are not current, and write them into it (needs --receipt).")
@click.option("--recheck", is_flag=True, help="With --stale: also the rows judged by an earlier kcontract.")
@click.option("--no-cache", is_flag=True, help="Compute every float64 reference afresh (a cold run).")
@click.option("--profile", is_flag=True, help="Print seconds per stage and peak memory of every gate.")
@click.option("--sanitize", is_flag=True,
              help="Instead of the gates: each CUDA entry's smallest case, and its controls, under compute-sanitizer.")
@click.option("--interpret", is_flag=True,
              help="Only Triton kernels, through Triton's interpreter on the CPU: a double whose bits are numpy's.")
@strict_records_option
@click.option("--verbose", "-v", is_flag=True, help="Tracebacks of failing kernels and every control's evidence.")
@user_errors
def run_command(contract_path, only, control_names, gate, case, seed, no_controls, jobs, json_path, junit_path,
                shard_text, receipt_path, stale, recheck, no_cache, profile, sanitize, interpret, strict_records,
                verbose) -> None:
    """Run the contract: each entry's gates, each control at its gate, and print the SUMMARY line."""
    session = Session(contract_path, progress=CompileProgress(err))
    selection = Selection(tuple(only), tuple(control_names), gate, case, seed, no_controls, strict_records, interpret)
    if sanitize:
        sanitize_run(session, selection, jobs, json_path,
                     refused=bool(receipt_path or junit_path or shard_text or interpret))
    options = RunOptions(selection, parse_shard(shard_text) if shard_text is not None else None, receipt_path, stale,
                         recheck, not no_cache, jobs, json_path, junit_path)
    listeners = run_listeners(session, profile=profile, verbose=verbose) + writers(session, options)
    result = session.run(options, listeners)
    if result.line is not None:
        out.print(result.line, markup=False)
    sys.exit(result.exit_code)
