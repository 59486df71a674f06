"""`kcontract check`: everything that needs no GPU, the CPU CI job in one command."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from kcontract.cachesize import keep_under_cap
from kcontract.commands.common import contract_option, err, out, strict_records_option, user_errors
from kcontract.commands.gate5_text import compile_failures, control_lines, finding_lines, gate5_lines, gate5_summary
from kcontract.commands.preflight import preflight
from kcontract.contract.loader import load_contract
from kcontract.errors import EnvironmentProblem
from kcontract.exitcodes import ExitCode
from kcontract.receipts.check import check_receipts
from kcontract.records.gate5 import check_records
from kcontract.sassdiff.unchanged import unchanged_patches
from kcontract.toolchain.build import build
from kcontract.toolchain.cache import CompileCache, cache_root
from kcontract.toolchain.globals import unregistered
from kcontract.toolchain.units import contract_uses, group_units
from kcontract.verdict.summary import plural



@click.command("check", short_help="Everything that needs no GPU (the CPU CI job).")
@contract_option
@click.option("--jobs", type=click.IntRange(1, 64), help="Worker processes for cold compiles.")
@strict_records_option
@click.option("--strict", "strict_receipts", is_flag=True,
              help="Receipt rows judged by an earlier kcontract (its core or their family changed) fail too.")
@user_errors
def check_command(contract_path: str, jobs: int | None, strict_records: bool, strict_receipts: bool) -> None:
    """Validate the contract, find unregistered kernels, compile for every SM, run gate 5, check receipts."""
    started, begun = time.monotonic(), time.time()  # begun: wall clock, as cache items are stamped
    loaded = load_contract(contract_path)
    toolchain = preflight(loaded, contract_path, cuda=bool(contract_uses(loaded)), gpu=False).toolchain
    base = Path(contract_path).resolve().parent
    problems: list[str] = []

    folders = loaded.model.folders.kernels
    found, missing = unregistered(loaded, [base / folder for folder in folders])
    for kernel in missing:
        problems.append(f"{_rel(kernel.file, base)}:{kernel.line}: __global__ `{kernel.name}` is registered by no "
                        f"entry: add an entry to {contract_path} whose kernel.cuda.symbols names it "
                        f"(docs/kernel-contract.md says how)")

    units = group_units(contract_uses(loaded))
    cache = CompileCache(cache_root(contract_path))
    built = build(units, loaded.targets, cache, base, jobs) if toolchain is not None else None
    problems += compile_failures(built.failures) if built else []
    try:
        unchanged = unchanged_patches(loaded, built) if built else []
    except EnvironmentProblem as error:  # no nvdisasm: bytes still refuse a patch that changes nothing at all
        err.print(f"note: controls' patches compared by bytes only, not machine code: {error.message}", markup=False)
        unchanged = unchanged_patches(loaded, built, sass=False)
    if unchanged:
        unchanged[0].others = unchanged[1:]
        raise unchanged[0]

    report = check_records(loaded, built=built, cache=cache, strict=strict_records) if built else None
    problems += gate5_lines(report) if report else []
    receipts = check_receipts(loaded, strict=strict_receipts, built=built)
    problems += receipts.problems
    compiles = len(built.modules) + len(built.failures) if built else 0
    records = len(report.rows) if report else 0
    if compiles == 0 and records == 0 and not loaded.controls:
        problems.append("nothing to check: no CUDA kernel compiled, no launch record, no control; a check that "
                        "checked nothing proves nothing (register a CUDA kernel, or a control for a Python one: "
                        "docs/kernel-contract.md, section 4)")

    for line in problems:
        out.print(f"FAIL {line}", markup=False)
    for line in (control_lines(report) + finding_lines(report)) if report else []:
        out.print(line, markup=False)
    for line in receipts.notes:
        out.print(f"note: {line}", markup=False)
    pruned = keep_under_cap(cache_root(contract_path), begun)
    if pruned:
        err.print(f"note: {pruned}", markup=False)
    entries, controls = len(loaded.entries), len(loaded.controls)
    passed = not problems
    sms = [sm for sm in loaded.targets if sm not in built.skipped] if built else []
    compiled = (f"{compiles} compiles ({len(units)} sources x {len(sms)} SMs, {built.cached} cached), "
                f"{len({(f.unit.ident, f.sm) for f in built.failures})} failed; gate 5: {gate5_summary(report)}; "
                f"gate-5 controls: {sum(c.red for c in report.controls)} red as planted, "
                f"{len(report.missed_controls)} missed; toolchain {toolchain.id}" if built else "no CUDA kernel")
    out.print(f"SUMMARY check {'passed' if passed else 'FAILED'}: contract valid ({plural(entries, 'entry', 'entries')}, "
              f"{plural(controls, 'control')}); {len(found)} __global__ in {', '.join(f + '/' for f in folders)}, {len(missing)} unregistered; "
              f"{compiled}; "
              f"receipts: {receipts.summary()}; {time.monotonic() - started:.1f} s", markup=False)
    sys.exit(int(ExitCode.OK if passed else ExitCode.FAILED))


def _rel(path: Path, base: Path) -> str:
    """`kernels/x.cu` rather than an absolute path."""
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)
