"""`kcontract coverage [ENTRY ...]`: which lines and `if` outcomes of each CUDA entry's kernel its cases run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from kcontract.commands.common import Jobs, contract_option, err, out, user_errors
from kcontract.commands.preflight import device_target, preflight
from kcontract.contract.loader import load_contract
from kcontract.coverage.campaign import judge_runs, prepare, save, workdir
from kcontract.coverage.report import entry_report, missed_text, source_gaps
from kcontract.errors import UsageError
from kcontract.provenance import git_state
from kcontract.toolchain.cache import CACHE_ENV, cache_root


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
    loaded = load_contract(contract_path)
    chosen = _chosen(loaded, names)
    preflight(loaded, contract_path, cuda=True, gpu=False, outputs={"json": json_path})
    if receipt_path and not Path(receipt_path).is_file():
        raise UsageError(f"--receipt {receipt_path}: no such receipt; write it with `kcontract run --receipt`")
    sm = sm or device_target(loaded)
    os.environ[CACHE_ENV] = str(cache_root(contract_path).resolve())  # stand-ins share inputs and references
    campaign = prepare(loaded, chosen, sm)
    err.print(f"coverage: {len(chosen)} entries, {len(campaign.sources)} sources instrumented in "
              f"{workdir(loaded)}", markup=False)
    if not prepare_only:
        judge_runs(campaign, _run(workdir(loaded) / "contract.yaml", jobs))
        save(campaign, workdir(loaded))
    reports = [entry_report(campaign, campaign.entries[n], loaded.entry(n).coverage) for n in chosen]
    for report in reports:
        out.print(_line(report, campaign), markup=False)
        for problem in report.problems:
            out.print(f"  FAIL {problem}", markup=False)
        for failed in campaign.entries[report.entry].failed:
            out.print(f"  FAIL {failed}", markup=False)
    for label, gaps in source_gaps(campaign, reports).items():
        if gaps and not prepare_only:
            out.print(f"{label}: {len(gaps)} lines no entry executes: {missed_text(campaign.sources[label], gaps)}",
                      markup=False)
    documents = {r.entry: {**r.as_dict(), "source_sha256": campaign.sources[r.source].sha256, "sm": sm}
                 for r in reports}
    if json_path:
        Path(json_path).write_text(json.dumps(documents, indent=1) + "\n")
    if receipt_path and not prepare_only:
        _into_receipt(loaded, receipt_path, documents)
    bad = [r for r in reports if r.problems or campaign.entries[r.entry].failed]
    out.print(_summary(reports, bad, prepare_only), markup=False)
    sys.exit(1 if bad and not prepare_only else 0)


def _chosen(loaded, names) -> list[str]:
    """The CUDA entries named (default: every one), or a usage error naming what is not one."""
    cuda = [e.name for e in loaded.entries if e.kernel.cuda is not None]
    for name in names:
        if name not in [e.name for e in loaded.entries]:
            raise UsageError(f"{name}: no such entry in {loaded.path}; CUDA entries: {', '.join(cuda[:8])}")
        if name not in cuda:
            raise UsageError(f"{name}: coverage counts the lines of a CUDA kernel; its kernel is "
                             f"{loaded.entry(name).kernel.label}")
    if not cuda:
        raise UsageError(f"{loaded.path} has no CUDA entry: coverage counts the lines of CUDA kernels")
    return list(names) or cuda


def _run(contract: Path, jobs) -> list:
    """Every stand-in through the ordinary runner, on the GPU."""
    from kcontract.report.progress import RunProgress
    from kcontract.runner.plan import Selection, plan_tasks
    from kcontract.runner.session import auto_jobs, run_tasks, work_units

    from kcontract.runner.prebuild import prebuild

    standins = load_contract(str(contract))
    ready = preflight(standins, str(contract), cuda=True, gpu=True, names=[e.name for e in standins.entries],
                      quiet=True)
    tasks = plan_tasks(standins, str(contract), Selection(controls=tuple(c.name for c in standins.controls)))
    built = prebuild(standins, tasks, ready.sm)
    if built:
        err.print(built, markup=False)
    workers = auto_jobs(standins, gpu=True)[0] if jobs == "auto" else jobs
    with RunProgress(out, work_units(standins, tasks)) as progress:
        outcomes = run_tasks(tasks, workers, lambda step: None, progress.done)
    if any(o.status == "interrupted" for o in outcomes):
        raise KeyboardInterrupt
    return outcomes


def _line(report, campaign) -> str:
    """`coverage E (kernels/x.cu): lines 60 of 64 (93.8 %), branches 20 of 24; missed: lines ...`."""
    lines = f"lines {len(report.executed)} of {len(report.reachable) - len(report.argued)}"
    head = f"coverage {report.entry} ({report.source}): "
    if not report.ran:
        return head + f"{len(report.reachable)} lines reachable, {report.branches[1]} branch outcomes (not run)"
    text = head + f"{lines} ({report.pct:.1f} %), branches {report.branches[0]} of {report.branches[1]}"
    if report.argued:
        text += f", {len(report.argued)} argued"
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
    taken, outcomes = sum(r.branches[0] for r in reports), sum(r.branches[1] for r in reports)
    if prepare_only:
        return (f"COVERAGE {len(reports)} CUDA entries prepared: {reach} reachable lines, {outcomes} branch outcomes "
                f"(not run)")
    pct = 100.0 * done / reach if reach else 100.0
    return (f"COVERAGE {len(reports)} CUDA entries: lines {done} of {reach} executed ({pct:.1f} %), branches {taken} "
            f"of {outcomes}; {len(bad)} failing (below a floor, an argument that no longer holds, or a stand-in "
            f"that did not run)")


def _into_receipt(loaded, receipt_path: str, documents: dict) -> None:
    """Each entry's coverage into the receipt, keyed by its source's sha256 as mutation scores are."""
    receipt = json.loads(Path(receipt_path).read_text())
    commit = git_state(Path(loaded.path).resolve().parent)["commit"]
    receipt.setdefault("coverage", {}).update({n: {**d, "measured_at": commit} for n, d in documents.items()})
    Path(receipt_path).write_text(json.dumps(receipt, indent=1, sort_keys=True) + "\n")
