"""`kcontract run`: every entry through gates 1-4, every control, then the SUMMARY line."""

from __future__ import annotations

import fnmatch
import sys

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kcontract.commands.common import contract_option, err, out, user_errors
from kcontract.contract.loader import load_contract
from kcontract.errors import UsageError
from kcontract.report.json_report import run_document, write_json
from kcontract.report.junit import junit_document, write_junit
from kcontract.report.receipt import build_receipt
from kcontract.report.summary import summarise
from kcontract.report.tables import control_table, entry_table, print_failures
from kcontract.runner.outcome import Task
from kcontract.runner.pool import in_process, run_in_workers

RANGE_GATES = (1, 2, 3, 4)


@click.command("run")
@contract_option
@click.option("--only", "only", multiple=True, help="Run entries matching this glob (repeatable).")
@click.option("--control", "control_names", multiple=True, help="Run only this control (repeatable).")
@click.option("--gate", "gate", type=click.IntRange(1, 5), help="Run only this gate.")
@click.option("--case", "case", help="Run only this case of the entry.")
@click.option("--seed", "seed", type=click.IntRange(0, 2**63 - 1), help="Override the contract's seed.")
@click.option("--no-controls", is_flag=True, help="Skip the planted-fault controls.")
@click.option("--jobs", "jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes running entries side by side.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the full results as JSON.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="Write JUnit XML for CI dashboards.")
@click.option("--receipt", "receipt_path", type=click.Path(dir_okay=False),
              help="Write a receipt: environment, source hashes, results (commit it under receipts/).")
@user_errors
def run_command(contract_path, only, control_names, gate, case, seed, no_controls, jobs, json_path, junit_path,
                receipt_path) -> None:
    """Run the contract: gates 1-4 per entry, each control at its gate, and print the SUMMARY line."""
    loaded = load_contract(contract_path)
    seed = loaded.seed if seed is None else seed
    entries = [e for e in loaded.entries if not only or any(fnmatch.fnmatch(e.name, g) for g in only)]
    if control_names:
        entries = []
    if only and not entries:
        raise UsageError(f"--only {' '.join(only)} matches no entry; entries: "
                         f"{', '.join(e.name for e in loaded.entries[:8])}")
    names = {e.name for e in entries}
    controls = [] if no_controls else [c for c in loaded.controls
                                       if (c.name in control_names) or (not control_names and c.entry in names)]
    if gate is not None:
        controls = [c for c in controls if c.gate == gate or c.name in control_names]
    missing = set(control_names) - {c.name for c in loaded.controls}
    if missing:
        raise UsageError(f"--control {', '.join(sorted(missing))}: no such control in {contract_path}")
    if case is not None:
        for e in entries + [loaded.entry(c.entry) for c in controls]:
            if case not in e.family.case_names():
                raise UsageError(f"--case {case}: entry {e.name} has no such case; cases: "
                                 f"{', '.join(e.family.case_names())}")

    def gates_for(entry_gates: list[int]) -> list[int]:
        chosen = [g for g in entry_gates if g in RANGE_GATES]
        return [g for g in chosen if g == gate] if gate else chosen

    tasks = [Task("entry", e.name, e.name, contract_path, gates_for(e.gates), seed, case, e.timeout) for e in entries]
    tasks += [Task("control", c.name, c.entry, contract_path, gates_for(loaded.entry(c.entry).gates), seed, case,
                   c.timeout or loaded.entry(c.entry).timeout) for c in controls]
    tasks = [t for t in tasks if t.gates]
    refuse_cuda_without_gpu(loaded, tasks)
    require_python_kernels(loaded, {t.name for t in tasks})
    outcomes = run_tasks(tasks, jobs)
    entry_outcomes = [o for o in outcomes if o.task.kind == "entry"]
    control_outcomes = [o for o in outcomes if o.task.kind == "control"]
    planted = {c.name: c.gate for c in loaded.controls}
    summary = summarise(entry_outcomes, control_outcomes, loaded.known_findings, planted)
    if gate in (None, 5) and not control_names:
        add_launch_records(summary, loaded)
    if entry_outcomes:
        out.print(entry_table(entry_outcomes))
    if control_outcomes:
        out.print(control_table(control_outcomes, planted))
    print_failures(err, entry_outcomes)
    print_failures(err, control_outcomes, kind="control")
    for finding in summary.stale_known:
        err.print(f"known finding {finding} passes now: remove it from known_findings in {contract_path}",
                  markup=False)
    document = run_document(entry_outcomes, control_outcomes, summary)
    if json_path:
        write_json(json_path, document)
    if junit_path:
        write_junit(junit_path, junit_document(entry_outcomes, control_outcomes, planted, summary))
    if receipt_path:
        names = {t.name for t in tasks}
        write_json(receipt_path, build_receipt(loaded, document, names, seed))
    out.print(summary.line(), markup=False)
    sys.exit(int(summary.exit_code))


def refuse_cuda_without_gpu(loaded, tasks: list[Task]) -> None:
    """Exit 3 before any work when a CUDA kernel would run and no GPU launcher is available."""
    from kcontract.launch import cuda_ready

    kernels = {c.name: c.kernel for c in loaded.controls} | {e.name: e.kernel for e in loaded.entries}
    cuda = sorted(t.name for t in tasks if kernels[t.name].cuda is not None)
    if cuda:
        cuda_ready(cuda)


def require_python_kernels(loaded, names: set[str]) -> None:
    """Exit 2 before any work when a python kernel's module cannot be found, naming where it is declared."""
    import importlib.util

    from kcontract.errors import ContractError

    for kind, items in (("entries", loaded.model.entries), ("controls", loaded.model.controls)):
        for i, item in enumerate(items):
            target = item.kernel.python
            if item.name not in names or target is None:
                continue
            module = target.partition(":")[0]
            try:
                found = importlib.util.find_spec(module) is not None
            except ImportError:
                found = False
            if not found:
                path = f"{kind}[{i}].kernel.python"
                raise ContractError(loaded.path, loaded.lines.get(path), path,
                                    "an importable module:function (run from the repository root or put its "
                                    "package on PYTHONPATH)", repr(target))


def add_launch_records(summary, loaded) -> None:
    """Gate 5 for CUDA entries: limit problems, record currency and gate-5 controls join the summary."""
    from kcontract.records.gate5 import check_records
    from kcontract.toolchain.units import contract_uses

    if not contract_uses(loaded):
        return
    report = check_records(loaded)
    summary.limit_problems = len(report.problems)
    summary.limits_ok = report.passed
    summary.controls += len(report.controls)
    summary.red += sum(c.red for c in report.controls)
    summary.missed += len(report.missed_controls)
    summary.missed_controls += [c.name for c in report.missed_controls]
    for line in report.notes + report.errors:
        err.print(f"gate 5: {line}", markup=False)


def run_tasks(tasks: list[Task], jobs: int = 1):
    """Run tasks in worker processes with a progress bar; in-process when KCONTRACT_IN_PROCESS=1."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        bar = progress.add_task("kcontract run", total=len(tasks))

        def done(task: Task) -> None:
            progress.update(bar, description=f"done {task.kind} {task.name}")
            progress.advance(bar)

        if in_process():
            from kcontract.runner.execute import execute

            outcomes = []
            for task in tasks:
                outcomes.append(execute(task))
                done(task)
            return outcomes
        return run_in_workers(tasks, jobs, done)
