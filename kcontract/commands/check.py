"""`kcontract check`: everything that needs no GPU, the CPU CI job in one command."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from kcontract.commands.common import contract_option, out, user_errors
from kcontract.commands.gate5_text import compile_failures, control_lines, gate5_lines, gate5_summary
from kcontract.contract.loader import load_contract
from kcontract.errors import ContractError
from kcontract.exitcodes import ExitCode
from kcontract.receipts import check_receipts
from kcontract.records.gate5 import check_records
from kcontract.toolchain.build import build
from kcontract.toolchain.cache import CompileCache, default_root
from kcontract.toolchain.globals import unregistered
from kcontract.toolchain.units import contract_uses, group_units

KERNELS_DIR = "kernels"


@click.command("check", short_help="Everything that needs no GPU (the CPU CI job).")
@contract_option
@click.option("--jobs", type=click.IntRange(1, 64), help="Worker processes for cold compiles.")
@user_errors
def check_command(contract_path: str, jobs: int | None) -> None:
    """Validate the contract, find unregistered kernels, compile for every SM, run gate 5, check receipts."""
    started = time.monotonic()
    loaded = load_contract(contract_path)
    base = Path(contract_path).resolve().parent
    problems: list[str] = []

    found, missing = unregistered(loaded, base / KERNELS_DIR)
    for kernel in missing:
        problems.append(f"{_rel(kernel.file, base)}:{kernel.line}: __global__ `{kernel.name}` is registered by no "
                        f"entry: add an entry to {contract_path} whose kernel.cuda.symbols names it "
                        f"(docs/kernel-contract.md says how)")

    uses = contract_uses(loaded)
    _require_sources(loaded, contract_path)
    units = group_units(uses)
    built = build(units, loaded.targets, CompileCache(default_root(contract_path)), base, jobs)
    problems += compile_failures(built.failures)

    report = check_records(loaded, built=built)
    problems += gate5_lines(report)
    receipts = check_receipts(loaded)
    problems += receipts.stale
    compiles = len(units) * len(loaded.targets)
    records = len(report.rows)
    if compiles == 0 and records == 0 and not loaded.controls:
        problems.append("nothing to check: no CUDA kernel compiled, no launch record, no control; a check that "
                        "checked nothing proves nothing (register a CUDA kernel in the contract)")

    for line in problems:
        out.print(f"FAIL {line}", markup=False)
    for line in control_lines(report):
        out.print(line, markup=False)
    entries, controls = len(loaded.entries), len(loaded.controls)
    passed = not problems
    out.print(f"SUMMARY check {'passed' if passed else 'FAILED'}: contract valid ({entries} entries, {controls} "
              f"controls); {len(found)} __global__ in {KERNELS_DIR}/, {len(missing)} unregistered; "
              f"{compiles} compiles ({len(units)} sources x {len(loaded.targets)} SMs, {built.cached} cached), "
              f"{len({(f.unit.ident, f.sm) for f in built.failures})} failed; gate 5: {gate5_summary(report)}; "
              f"gate-5 controls: {sum(c.red for c in report.controls)} red as planted, "
              f"{len(report.missed_controls)} missed; receipts: {receipts.summary()}; "
              f"{time.monotonic() - started:.1f} s", markup=False)
    sys.exit(int(ExitCode.OK if passed else ExitCode.FAILED))


def _require_sources(loaded, contract_path: str) -> None:
    """Every CUDA source the contract names exists; else a ContractError at its line."""
    base = Path(contract_path).resolve().parent
    for kind, items in (("entries", loaded.entries), ("controls", loaded.controls)):
        for item in items:
            kernel = item.kernel.cuda
            if kernel is not None and not (base / kernel.source).is_file():
                path = f"{kind}[{item.index}].kernel"
                raise ContractError(contract_path, loaded.lines.get(path), path + ".cuda.source",
                                    f"an existing CUDA source, relative to {base}", repr(kernel.source))


def _rel(path: Path, base: Path) -> str:
    """`kernels/x.cu` rather than an absolute path."""
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)
