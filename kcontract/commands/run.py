"""`kcontract run`: every entry through its gates, every control, then the SUMMARY line."""

from __future__ import annotations

import sys
import time
import click

from kcontract.cachesize import keep_under_cap
from kcontract.commands.common import Count, Jobs, contract_option, err, out, strict_records_option, user_errors
from kcontract.commands.preflight import preflight
from kcontract.contract.loader import load_contract
from kcontract.errors import UsageError
from kcontract.gatetable import NUMBERS, launching, records_gate
from kcontract.report.github import emit
from kcontract.report.json_report import run_document, write_json
from kcontract.report.junit import junit_document, write_junit
from kcontract.report.progress import RunProgress
from kcontract.receipts.check import needs_gpu
from kcontract.receipts.form import read_json
from kcontract.receipts.stale import plan_stale
from kcontract.receipts.write import run_receipt
from kcontract.report.tables import control_table, entry_table, print_failures, profile_table
from kcontract.runner.plan import Selection, plan_tasks
from kcontract.runner.prebuild import prebuild
from kcontract.runner.session import auto_jobs, run_contract, work_units
from kcontract.runner.shard import parse_shard, shard_tasks
from kcontract.toolchain.cache import cache_root


@click.command("run", short_help="Run every gate and control; print SUMMARY.")
@contract_option
@click.option("--only", "only", multiple=True, help="Run entries matching this glob (repeatable).")
@click.option("--control", "control_names", multiple=True, help="Run only this control (repeatable).")
@click.option("--gate", "gate", type=click.IntRange(min(NUMBERS), max(NUMBERS)), help="Run only this gate.")
@click.option("--case", "case", help="Run only this case (a gate's case, as replay commands name it).")
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
@strict_records_option
@click.option("--verbose", "-v", is_flag=True, help="Tracebacks of failing kernels and every control's evidence.")
@user_errors
def run_command(contract_path, only, control_names, gate, case, seed, no_controls, jobs, json_path, junit_path,
                shard_text, receipt_path, stale, recheck, no_cache, profile, sanitize, strict_records, verbose) -> None:
    """Run the contract: each entry's gates, each control at its gate, and print the SUMMARY line."""
    started, begun = time.monotonic(), time.time()  # begun: wall clock, as cache items are stamped
    shard = parse_shard(shard_text) if shard_text is not None else None
    loaded = load_contract(contract_path)
    if sanitize:
        if gate is not None or case is not None or seed is not None or receipt_path or junit_path or shard:
            raise UsageError("--sanitize runs each entry's smallest case at the contract's seed: drop --gate, --case, "
                             "--seed, --shard, --receipt and --junit")
        from kcontract.commands.sanitize_mode import sanitize_run

        sanitize_run(loaded, contract_path, tuple(only), tuple(control_names), no_controls, jobs, json_path)
    selection = Selection(tuple(only), tuple(control_names), gate, case, seed, no_controls, strict_records)
    refresh = _stale_plan(loaded, selection, shard, receipt_path, stale, recheck)
    if receipt_path and selection.partial:
        raise UsageError("--receipt attests the whole contract: drop --only, --control, --gate, --case and "
                         "--no-controls")
    if shard and selection.partial:
        raise UsageError(f"--shard {shard} splits the whole contract: drop --only, --control, --gate, --case and "
                         f"--no-controls")
    tasks = plan_tasks(loaded, contract_path, selection, cache=not no_cache)
    if refresh is not None:
        tasks = refresh.select(tasks)
        err.print(refresh.line(), markup=False)
        if not tasks:
            _write_stale(loaded, receipt_path, refresh, None, None, started)
    covers = None
    if shard:
        part = shard_tasks(loaded, tasks, shard)
        tasks, covers = part.tasks, part.covers
        err.print(part.line, markup=False)
    kernels = {e.name: e.kernel for e in loaded.entries} | {c.name: c.kernel for c in loaded.controls}
    on_gpu = sorted({t.name for t in tasks if kernels[t.name].launcher() != "python"
                     and any(g in launching() for g in t.gates)})
    ready = preflight(loaded, contract_path, cuda=any(kernels[t.name].cuda is not None for t in tasks),
                      gpu=bool(on_gpu), outputs={"json": json_path, "junit": junit_path, "receipt": receipt_path},
                      names=on_gpu)
    built = prebuild(loaded, tasks, ready.sm)
    if built:
        err.print(built, markup=False)
    if jobs == "auto":
        jobs, why = auto_jobs(loaded, gpu=bool(on_gpu))
        err.print(f"--jobs auto: {why}", markup=False)
    whole = not selection.partial and (shard is None or shard.index == 1)  # of shards, only 1 notes orphan records
    with RunProgress(out, work_units(loaded, tasks)) as progress:
        result = run_contract(loaded, tasks, jobs, progress.step, progress.done, whole=whole)
    summary = result.summary
    if summary.interrupted:
        err.print(f"interrupted: {progress.finished} of {len(tasks)} tasks finished; nothing written", markup=False)
        sys.exit(int(summary.exit_code))
    if out.is_terminal:
        if result.entries:
            out.print(entry_table(result.entries))
        if result.controls:
            out.print(control_table(result.controls, result.planted))
    if profile:
        out.print(profile_table(result.entries + result.controls))
    print_failures(err, result.entries, verbose=verbose)
    print_failures(err, result.controls, planted=result.planted, verbose=verbose)
    emit(loaded, contract_path, result.entries, result.controls, summary, result.planted)
    for note in summary.notes:
        err.print(f"gate {records_gate().number}: {note}", markup=False)
    for finding in summary.findings:
        err.print(f"gate {records_gate().number}: {finding}", markup=False)
    for cause in summary.environment:
        err.print(f"ERROR: this machine cannot run the kernels: {cause}", markup=False)
    for finding in summary.stale_known:
        err.print(f"known finding {finding} passes now: remove it from known_findings in {contract_path}",
                  markup=False)
    document = run_document(result.entries, result.controls, summary, result.planted, ready.toolchain)
    if json_path:
        write_json(json_path, document)
    if junit_path:
        write_junit(junit_path, junit_document(result.entries, result.controls, result.planted, summary))
    pruned = keep_under_cap(cache_root(contract_path), begun)
    if pruned:
        err.print(f"note: {pruned}", markup=False)
    if refresh is not None:
        _write_stale(loaded, receipt_path, refresh, document, summary, started)
    if receipt_path:
        previous = _previous(receipt_path)
        mode = f"shard {shard}" if shard else "whole"
        write_json(receipt_path, run_receipt(loaded, document, previous, mode=mode, seed=loaded.seed if seed is None
                                             else seed, wall_s=time.monotonic() - started, gpu=needs_gpu(loaded),
                                             keep_rows=False, notes=summary.notes, covers=covers))
    out.print(summary.line(), markup=False)
    sys.exit(int(summary.exit_code))


def _stale_plan(loaded, selection, shard, receipt_path, stale: bool, recheck: bool):
    """The rows `--stale` refreshes, or None for a plain run; the options it cannot take refused."""
    if recheck and not stale:
        raise UsageError("--recheck re-runs rows judged by an earlier kcontract with --stale: add --stale")
    if not stale:
        return None
    if not receipt_path:
        raise UsageError("--stale refreshes a receipt's rows: give the receipt with --receipt FILE")
    if selection.partial or shard:
        raise UsageError("--stale picks the rows itself: drop --only, --control, --gate, --case, --no-controls and "
                         "--shard")
    return plan_stale(loaded, receipt_path, recheck)


def _write_stale(loaded, receipt_path: str, refresh, document, summary, started: float):
    """Write the re-run rows into the receipt over its other rows, print the whole receipt's SUMMARY with how many
    rows ran, and exit with the receipt's code."""
    document = document or {"entries": [], "controls": [], "toolchain": None}
    receipt = run_receipt(loaded, document, refresh.previous, mode="stale", seed=loaded.seed,
                          wall_s=time.monotonic() - started, gpu=needs_gpu(loaded), keep_rows=True,
                          notes=summary.notes if summary is not None else (refresh.previous or {}).get("notes", []))
    if document["entries"] or document["controls"] or refresh.dropped:
        write_json(receipt_path, receipt)
    out.print(f"{receipt['summary']} (re-ran {len(refresh.rerun)} of {refresh.total} rows)", markup=False)
    sys.exit(receipt["exit_code"])


def _previous(path: str) -> dict:
    """The receipt already at `path` (its mutation scores and bench rows carry over where the kernel is unchanged),
    or {}."""
    try:
        previous = read_json(path)
    except UsageError:
        return {}
    return previous if isinstance(previous, dict) else {}
