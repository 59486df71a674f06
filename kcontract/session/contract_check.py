"""`kcontract check` as a session step: everything that needs no GPU (registration, compiles for every SM, gate 5,
the controls' patches, receipts), gathered into the lines to print and the SUMMARY, with nothing printed here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kcontract.cachedir import cache_root
from kcontract.cachesize import keep_under_cap
from kcontract.errors import EnvironmentProblem
from kcontract.gatetable import records_gate
from kcontract.receipts.currency import ReceiptReport, check_receipts
from kcontract.records.record_check import RecordsReport, check_records
from kcontract.report.records_text import compile_failures, control_lines, finding_lines, records_lines, records_summary
from kcontract.sassdiff.recompiled import Recompiled, judge_recompiled
from kcontract.sassdiff.unchanged import unchanged_patches
from kcontract.sms import first_sm
from kcontract.toolchain.globals import unregistered
from kcontract.verdict.summary import plural

NOTHING = ("nothing to check: no CUDA kernel compiled, no launch record, no control; a check that checked nothing "
           "proves nothing (register a CUDA kernel, or a control for a Python one: docs/kernel-contract.md, "
           "section 4)")


@dataclass
class Checked:
    """What the check found: failures (`FAIL ...` on stdout), its other lines, the SUMMARY."""

    problems: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    summary: str = ""

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass
class _Found:
    """The pieces the SUMMARY line is made of."""

    globals: int = 0
    missing: int = 0
    units: int = 0
    first_units: int = 0  # patched controls' units compiled for the first SM alone
    first_sm: str = ""
    built: object = None
    records: RecordsReport | None = None
    receipts: ReceiptReport | None = None
    toolchain: object = None
    recompiled: Recompiled | None = None  # every module compiled afresh, against the cache (--recompile)


def check_contract(session, strict_records: bool, strict_receipts: bool, say: Callable[[str], None]) -> Checked:
    """Validate (the session loaded the contract), find unregistered kernels, compile for every SM (through the
    session's Builds: its jobs, progress and `--recompile` are the session's), run gate 5, refuse controls' patches
    that change nothing, check receipts; `say` hears the stderr lines as they come."""
    loaded, checked, found = session.loaded, Checked(), _Found()
    ready = session.machine(cuda=bool(session.builds.units), gpu=False, say=say)
    found.toolchain = ready.toolchain
    checked.problems += _unregistered(session, found)
    found.built = _compile(session, found) if ready.toolchain is not None else None
    if found.built:
        checked.problems += compile_failures(found.built.failures) + _recompiled(session, found)
        _refuse_unchanged(loaded, session.builds, say)
        found.records = check_records(loaded, builds=session.builds, strict=strict_records)
        checked.problems += records_lines(found.records)
        checked.lines += control_lines(found.records) + finding_lines(found.records)
    found.receipts = check_receipts(loaded, strict=strict_receipts, built=session.builds if found.built else None)
    checked.problems += found.receipts.problems
    if _checked_nothing(loaded, found):
        checked.problems.append(NOTHING)
    checked.lines += [f"note: {line}" for line in found.receipts.notes]
    pruned = keep_under_cap(cache_root(session.path), session.begun)
    if pruned:
        say(f"note: {pruned}")
    checked.summary = _summary(session, checked.passed, found)
    return checked


def _unregistered(session, found: _Found) -> list[str]:
    """A line per `__global__` under the kernel folders that no entry registers."""
    base = Path(session.path).resolve().parent
    folders = session.loaded.model.folders.kernels
    every, missing = unregistered(session.loaded, [base / folder for folder in folders])
    found.globals, found.missing = len(every), len(missing)
    return [f"{_rel(kernel.file, base)}:{kernel.line}: __global__ `{kernel.name}` is registered by no entry: add an "
            f"entry to {session.path} whose kernel.cuda.symbols names it (docs/kernel-contract.md says how)"
            for kernel in missing]


def _compile(session, found: _Found):
    """Every unit the contract uses, for every target SM, but a patched control's (gate 5's apart) for its first
    SM only: where its machine code changes there, no other SM can make it a patch that plants nothing, and
    `_refuse_unchanged` compiles the other SMs of one that changes nothing there. One that did not build there is
    built for every target here, so its failures are the check's."""
    loaded, builds = session.loaded, session.builds
    whole, first = _by_compile(loaded)
    found.first_sm = first_sm(loaded.targets) or ""
    found.first_units = len({id(builds.unit(kernel)) for kernel in first})
    found.units = len(builds.units) - found.first_units
    asks = [(whole, loaded.targets), (first, [found.first_sm])]
    built = builds.build_each(asks)
    unbuilt = [kernel for kernel in first if builds.held(kernel, found.first_sm) is None]
    if unbuilt:  # not built on its first SM (the toolchain skips it, or it failed there): every target decides
        built = builds.build_each(asks + [(unbuilt, loaded.targets)])
    return built


def _by_compile(loaded) -> tuple[list, list]:
    """The compiled kernels built for every target (entries', other controls'), and those for the first SM."""
    first = [c for c in loaded.controls if _first_sm_only(c)]
    named = {c.name for c in first}
    whole = [k.kernel.compiled for k in (*loaded.entries, *(c for c in loaded.controls if c.name not in named))
             if k.kernel.compiled is not None]
    return whole, [c.kernel.compiled for c in first]


def _first_sm_only(control) -> bool:
    """A control compiled first for one SM: patched, and no gate-5 control (those are judged on every SM)."""
    compiled = control.kernel.compiled
    return compiled is not None and bool(compiled.patch) and control.gate != records_gate().number


def _recompiled(session, found: _Found) -> list[str]:
    """`--recompile`: each module compiled afresh against the cache's; a line per module unlike it."""
    if not session.builds.recompile:
        return []
    found.recompiled = judge_recompiled(session.builds)
    return found.recompiled.unlike


def _refuse_unchanged(loaded, builds, say: Callable[[str], None]) -> None:
    """Raise the first control whose patch changes no machine code on any target SM (saying so where nvdisasm is
    missing)."""
    try:
        refusals = unchanged_patches(loaded, builds)
    except EnvironmentProblem as error:  # no nvdisasm: bytes still refuse a patch that changes nothing at all
        say(f"note: controls' patches compared by bytes only, not machine code: {error.message}")
        refusals = unchanged_patches(loaded, builds, sass=False)
    if refusals:
        refusals[0].others = refusals[1:]
        raise refusals[0]


def _compiles(found: _Found) -> int:
    """Cubins compiled or failed."""
    return len(found.built.modules) + len(found.built.failures) if found.built else 0


def _checked_nothing(loaded, found: _Found) -> bool:
    """No compile, no launch record and no control: a check that proves nothing."""
    return _compiles(found) == 0 and not (found.records and found.records.rows) and not loaded.controls


def _compiled_text(loaded, found: _Found) -> str:
    """`N compiles (...), F failed; gate 5: ...; gate-5 controls: ...; toolchain ID`, or `no CUDA kernel`."""
    built, report = found.built, found.records
    if not built:
        return "no CUDA kernel"
    sms = [sm for sm in loaded.targets if sm not in built.skipped]
    failed = len({(f.unit.ident, f.sm) for f in built.failures})
    again = f"; {found.recompiled.text()}" if found.recompiled else ""
    first = f" and {plural(found.first_units, 'control')} on {found.first_sm}" if found.first_units else ""
    return (f"{_compiles(found)} compiles ({plural(found.units, 'source')} x {len(sms)} SMs{first}, "
            f"{built.cached} cached{again}), "
            f"{failed} failed; gate 5: {records_summary(report)}; gate-5 controls: "
            f"{sum(c.red for c in report.controls)} red as planted, {len(report.missed_controls)} missed; "
            f"toolchain {found.toolchain.id}")


def _summary(session, passed: bool, found: _Found) -> str:
    """The SUMMARY check line."""
    loaded = session.loaded
    folders = ", ".join(f + "/" for f in loaded.model.folders.kernels)
    return (f"SUMMARY check {'passed' if passed else 'FAILED'}: contract valid "
            f"({plural(len(loaded.entries), 'entry', 'entries')}, {plural(len(loaded.controls), 'control')}); "
            f"{found.globals} __global__ in {folders}, {found.missing} unregistered; "
            f"{_compiled_text(loaded, found)}; receipts: {found.receipts.summary()}; {session.seconds():.1f} s")


def _rel(path: Path, base: Path) -> str:
    """`kernels/x.cu` rather than an absolute path."""
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)
