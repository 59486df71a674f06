"""Launch records checked (gate 5): every CUDA entry compiled for every target SM, compared with records/, limit
 problems counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kcontract.builds.artifact import KernelBuild
from kcontract.builds.builds import Builds
from kcontract.gatetable import records_gate
from kcontract.sms import check_launch, limits_for, sm_number
from kcontract.records.records import (
    UPDATE_HINT,
    dumps,
    read_baseline,
    read_json,
    record_files,
    record_path,
    records_root,
    write_baseline,
    write_json,
)
from kcontract.problem import smem_on
from kcontract.records.shapes import launch_shapes
from kcontract.records.toolchains import STRICT_HINT, has_own_records, recorded_toolchains, toolchain_findings
from kcontract.toolchain.build import Build, Failure
from kcontract.toolchain.locate import Toolchain

KERNEL_FIELDS = ("symbol", "mangled", "threads", "dynamic_smem")
RECORDS = records_gate().number  # the contract's number for the launch-records gate
SM_FIELDS = ("registers", "static_smem", "stack", "spill_stores", "spill_loads", "barriers", "opt_in",
             "blocks_per_sm", "problems")


@dataclass
class Row:
    """One kernel symbol on one SM: its fresh facts and how they compare with the record."""

    owner: str  # entry or control name
    role: str
    sm: str
    status: str  # "ok", "stale", "missing"; "unrecorded": matches another toolchain's record where toolchains agree
    detail: str = ""
    facts: dict | None = None  # registers, static_smem, ..., problems
    threads: int = 0
    dynamic_smem: int = 0

    @property
    def problems(self) -> list[str]:
        """Limit problems of this launch on this SM."""
        return list((self.facts or {}).get("problems", []))


@dataclass
class ControlVerdict:
    """A gate-5 control: red when its kernel, standing in for its entry's, is stale or breaks a limit."""

    name: str
    entry: str
    stale: list[str]  # rows whose record no longer matches
    limits: list[str]  # limit problems of the control's launches
    note: str = ""

    @property
    def red(self) -> bool:
        """Gate 5 went red for this control."""
        return bool(self.stale or self.limits)


@dataclass
class RecordsReport:
    """Gate 5 over a contract: rows per entry x symbol x SM, stale notes, limit problems, controls, findings."""

    toolchain: Toolchain
    targets: list[str]
    root: Path
    strict: bool = False  # toolchain findings fail (--strict-records)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # stale record files or roles with no entry
    errors: list[str] = field(default_factory=list)  # compile failures, missing launch shapes
    problems: list[str] = field(default_factory=list)  # limit problems of entries, "entry/role: ..."
    baseline: int = 0
    baseline_problems: list[str] = field(default_factory=list)
    controls: list[ControlVerdict] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # what --update rewrote
    unaccepted: list[str] = field(default_factory=list)  # limit problems --update kept out of the baseline
    build: Build | None = None
    compile_failures: list[Failure] = field(default_factory=list)  # of gate-5 kernels
    findings: list[str] = field(default_factory=list)  # what the toolchain in use cannot check (not failures)
    toolchains: list[str] = field(default_factory=list)  # the ids of the toolchains that built the entries' kernels

    def count(self, status: str) -> int:
        """Entry rows with a status."""
        return sum(1 for r in self.rows if r.status == status)

    @property
    def new_problems(self) -> list[str]:
        """Limit problems not in the baseline."""
        known = set(self.baseline_problems)
        return [p for p in self.problems if p not in known]

    @property
    def current(self) -> bool:
        """Every record matches and none is left over."""
        return not self.notes and self.count("stale") == 0 and self.count("missing") == 0

    @property
    def passed(self) -> bool:
        """Compiles, records current, limit problems within the baseline; no finding under --strict-records."""
        return (not self.errors and not self.compile_failures and self.current and
                len(self.problems) <= self.baseline and not (self.strict and self.findings))

    @property
    def missed_controls(self) -> list[ControlVerdict]:
        """Gate-5 controls that did not go red."""
        return [c for c in self.controls if not c.red]


def recorded_kernels(loaded) -> list:
    """The CUDA kernels of the gate-5 entries and gate-5 controls."""
    return [e.kernel.compiled for e in _entries(loaded)] + [c.kernel.compiled for c in _controls(loaded)]


def _entries(loaded) -> list:
    return [e for e in loaded.entries if e.kernel.compiled is not None and RECORDS in e.gates]


def _controls(loaded) -> list:
    return [c for c in loaded.controls if c.gate == RECORDS and c.kernel.compiled is not None]


@dataclass
class KernelVerdict:
    """One kernel (an entry's, or a control's standing in for it) against the entry's committed record."""

    entry: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # left-over parts of the committed record
    problems: list[str] = field(default_factory=list)  # limit problems, "entry/role: ..."
    new_problems: list[str] = field(default_factory=list)  # those not in the baseline
    errors: list[str] = field(default_factory=list)  # what kept the record from being made
    committed: bool = True  # whether the entry has a committed record at all
    findings: list[str] = field(default_factory=list)  # what this toolchain cannot check (not failures)
    strict: bool = False  # findings fail (--strict-records)

    @property
    def stale(self) -> list[Row]:
        """Rows whose record is stale or missing."""
        return [r for r in self.rows if r.status in ("stale", "missing")]

    @property
    def passed(self) -> bool:
        """Record current, every symbol on every SM, no limit problem beyond the baseline (and, strict, no
        toolchain finding)."""
        return (not self.errors and not self.stale and not self.notes and not self.new_problems and bool(self.rows)
                and not (self.strict and self.findings))


def judge_kernel(loaded, entry, kernel, build: KernelBuild, *, root: Path | None = None,
                 strict: bool = False) -> KernelVerdict:
    """Compare `kernel`, as built for every target (`build`), with `entry`'s committed record and the baseline."""
    root = root or records_root(loaded)
    verdict = KernelVerdict(entry.name, strict=strict)
    verdict.errors += [f"{build.shown} does not compile for {sm}" for sm in build.failures]
    verdict.findings = toolchain_findings(root, build.toolchain, build.compiler, list(build.skipped))
    record, errors = fresh_record(entry, kernel.compiled, build, loaded.targets)
    verdict.errors += errors
    if record is None:
        return verdict
    targets = [sm for sm in loaded.targets if sm not in build.skipped]
    verdict.rows, verdict.notes, verdict.committed = compare_committed(root, build.toolchain, targets, entry.name,
                                                                       record)
    verdict.problems = _problems(entry.name, record)
    known = set((read_baseline(root) or {}).get("problems", []))
    verdict.new_problems = [p for p in verdict.problems if p not in known]
    return verdict


def compare_committed(root: Path, toolchain: str, targets: list[str], name: str,
                      record: dict) -> tuple[list[Row], list[str], bool]:
    """Rows and notes of a fresh record on the `targets` the toolchain (its id) builds against the committed ones,
    and whether any record exists: the toolchain's own, else every other toolchain's in what toolchains share
    (sources, symbols, launch shapes)."""
    if has_own_records(root, toolchain):
        path = record_path(root, toolchain, name)
        committed = read_json(path)
        rows, notes = compare(name, committed, record, targets, _rel(path))
        return rows, notes, committed is not None
    others = [(t, record_path(root, t, name)) for t in recorded_toolchains(root)]
    others = [(t, path, data) for t, path in others if (data := read_json(path)) is not None]
    if not others:
        return compare(name, None, record, targets, _rel(record_path(root, toolchain, name)))[0], [], False
    rows, notes = [], []
    for _, path, data in others:
        found, left = compare(name, data, record, targets, _rel(path), own=False)
        rows, notes = _worse(rows, found), notes + left
    return rows, notes, True


def _worse(rows: list[Row], found: list[Row]) -> list[Row]:
    """Per role and SM, the row with the worse status of two comparisons."""
    rank = {"ok": 0, "unrecorded": 1, "missing": 2, "stale": 3}
    by_key = {(r.role, r.sm): r for r in rows}
    for row in found:
        old = by_key.get((row.role, row.sm))
        if old is None or rank[row.status] > rank[old.status]:
            by_key[(row.role, row.sm)] = row
    return list(by_key.values())


def check_records(loaded, update: bool = False, *, root: Path | None = None, builds: Builds | None = None,
                  jobs: int | None = None, strict: bool = False, accept_limits: bool = False) -> RecordsReport:
    """Gate 5 for a whole LoadedContract (its kernels from `builds`, the session's, else made here); with update,
    rewrite records and baseline first and list the changes (a limit problem joins the baseline only with
    `accept_limits`)."""
    builds = builds or Builds.of(loaded, jobs=jobs)
    entries, controls = _entries(loaded), _controls(loaded)
    built = builds.build(recorded_kernels(loaded), loaded.targets)
    report = RecordsReport(built.toolchain, loaded.targets, root or records_root(loaded), strict)
    report.build = built
    report.compile_failures = list(built.failures)
    fresh: dict[str, dict] = {}
    tools: dict[str, tuple[str, list[str]]] = {}  # each entry kernel's toolchain id -> its compiler, SMs it skips
    for entry in entries:
        build = builds.kernel(entry.kernel.compiled, loaded.targets)
        tools.setdefault(build.toolchain, (build.compiler, list(build.skipped)))
        record, errors = fresh_record(entry, entry.kernel.compiled, build, loaded.targets)
        report.errors += errors
        if record is not None:
            fresh[entry.name] = record
    report.toolchains = list(tools)
    if update:
        if report.errors or report.compile_failures:
            return report
        _update(loaded, report, fresh, accept_limits)
    report.findings = [line for tool, (compiler, skipped) in tools.items()
                       for line in toolchain_findings(report.root, tool, compiler, skipped)]
    report.notes += orphan_records(loaded, report.root)
    for name, record in fresh.items():
        skipped = tools[record["toolchain"]][1]
        targets = [sm for sm in report.targets if sm not in skipped]
        rows, notes, _ = compare_committed(report.root, record["toolchain"], targets, name, record)
        report.rows += rows
        report.notes += notes
        report.problems += _problems(name, record)
    baseline = read_baseline(report.root) or {}
    report.baseline = int(baseline.get("limit_problems", 0))
    report.baseline_problems = list(baseline.get("problems", []))
    for control in controls:
        entry = loaded.entry(control.entry)
        build = builds.kernel(control.kernel.compiled, loaded.targets, entry.kernel.compiled)
        verdict = judge_kernel(loaded, entry, control.kernel, build, root=report.root, strict=strict)
        report.controls.append(control_verdict(control, verdict))
    return report


def control_verdict(control, verdict: KernelVerdict) -> ControlVerdict:
    """A gate-5 control is red when its kernel, standing in for its entry's, is stale or breaks a limit."""
    if verdict.errors and not verdict.rows:
        return ControlVerdict(control.name, control.entry, [], [], "not evaluated: " + "; ".join(verdict.errors))
    stale = [f"{r.role} {r.sm}: {r.detail}" for r in verdict.rows if r.status == "stale"]
    note = "" if verdict.committed else f"entry {control.entry} has no record to compare with"
    return ControlVerdict(control.name, control.entry, stale, verdict.new_problems, note)


def fresh_record(entry, kernel, build: KernelBuild, targets: list[str]) -> tuple[dict | None, list[str]]:
    """The record an entry's (or a stand-in control's) kernel has as built, and errors that block it."""
    name, family = entry.name, entry.family
    errors = list(build.export_errors.values())
    shapes, more = launch_shapes(family, sorted(kernel.symbols), name, kernel.launch, build.exports)
    errors += more
    if build.inputs_error:
        return None, errors + [f"{name}: {build.inputs_error}"]
    if errors:
        return None, errors
    record = {"entry": name, "source": kernel.source, "toolchain": build.toolchain,
              "inputs_sha256": build.inputs_sha256, "kernels": {}}
    for role, expression in sorted(kernel.symbols.items()):
        shape = shapes[role]
        facts = {"symbol": expression, "mangled": None, "threads": shape.threads,
                 "dynamic_smem": shape.dynamic_smem, "sms": {}}
        for sm in targets:
            module = build.modules.get(sm)
            if module is None:
                continue  # its compile failure is reported once, by unit; or the toolchain skips this SM
            facts["mangled"] = module.lowered[expression]
            resources = module.resources.get(facts["mangled"])
            if resources is None:
                errors.append(f"{name}/{role}: the ptxas report for {sm} has no entry function "
                              f"{facts['mangled']} (is `{expression}` a __global__ kernel?)")
                continue
            check = check_launch(limits_for(sm), **resources, threads=shape.threads,
                                 dynamic_smem=shape.smem_on(sm))
            facts["sms"][sm] = {**resources, "opt_in": check.opt_in, "blocks_per_sm": check.blocks_per_sm,
                                "problems": list(check.problems)}
        record["kernels"][role] = facts
    return (None if errors else record), errors


def _problems(name: str, record: dict) -> list[str]:
    """Limit problems of a record as `entry/role: problem`."""
    return [f"{name}/{role}: {p}" for role, k in sorted(record["kernels"].items())
            for sm in sorted(k["sms"], key=sm_number) for p in k["sms"][sm]["problems"]]


def _diff(old: dict, new: dict, fields: tuple[str, ...]) -> list[str]:
    """`field old -> new` for each field that differs."""
    return [f"{f} {old.get(f)!r} -> {new.get(f)!r}" if f == "problems" else f"{f} {old.get(f)} -> {new.get(f)}"
            for f in fields if old.get(f) != new.get(f)]


def compare(name: str, committed: dict | None, fresh: dict, targets: list[str], where: str,
            own: bool = True) -> tuple[list[Row], list[str]]:
    """Rows for each role x SM of `fresh` against the committed record, and notes on left-over parts; a record of
    another toolchain (`own` False) is compared only in the sources, symbols and launch shapes."""
    rows, notes = [], []
    for role, kernel in sorted(fresh["kernels"].items()):
        for sm in targets:
            if sm not in kernel["sms"]:
                continue
            facts = kernel["sms"][sm]
            launch = {"threads": kernel["threads"], "dynamic_smem": smem_on(kernel["dynamic_smem"], sm)}
            if committed is None:
                rows.append(Row(name, role, sm, "missing", f"no record {where}: {UPDATE_HINT}", facts, **launch))
                continue
            old_kernel = committed.get("kernels", {}).get(role)
            old = (old_kernel or {}).get("sms", {}).get(sm)
            if old_kernel is None or (own and old is None):
                rows.append(Row(name, role, sm, "missing", f"{where} has no {role}{f' on {sm}' if own else ''}: "
                                                           f"{UPDATE_HINT}", facts, **launch))
                continue
            diffs = _diff(old_kernel, kernel, KERNEL_FIELDS) + (_diff(old, facts, SM_FIELDS) if own else [])
            if committed.get("inputs_sha256") != fresh["inputs_sha256"]:
                diffs.insert(0, f"{fresh['source']} (or its headers or options) changed since the record")
            status = "stale" if diffs else "ok" if own else "unrecorded"
            fix = UPDATE_HINT if own else (f"{where} is another toolchain's: rewrite it with that toolchain "
                                           f"(`kcontract records --update` there), or add this one's")
            detail = f"{'; '.join(diffs)}: {fix}" if diffs else "" if own else \
                f"agrees with {where} in sources, symbols and launch shapes; {STRICT_HINT}"
            rows.append(Row(name, role, sm, status, detail, facts, **launch))
    if committed is not None:
        for role, old_kernel in sorted(committed.get("kernels", {}).items()):
            if role not in fresh["kernels"]:
                notes.append(f"{where}: symbol `{role}` is no longer in entry {name}: {UPDATE_HINT}")
                continue
            extra = sorted(set(old_kernel.get("sms", {})) - set(targets)) if own else []
            if extra:
                notes.append(f"{where}: {role} recorded for {', '.join(extra)}, not a target: {UPDATE_HINT}")
    return rows, notes


def _update(loaded, report: RecordsReport, fresh: dict[str, dict], accept_limits: bool) -> None:
    """Rewrite every entry's record for the toolchain in use, drop record files of entries that are gone (of every
    toolchain), rewrite the baseline (a new limit problem only with `accept_limits`); list the changes."""
    names = {e.name for e in _entries(loaded)}
    for toolchain in recorded_toolchains(report.root):
        for name, path in record_files(report.root, toolchain).items():
            if name not in names:
                path.unlink()
                report.changes.append(f"{name}: record removed ({_rel(path)}; no such CUDA gate-5 entry)")
    problems: list[str] = []
    for name, record in sorted(fresh.items()):
        path = record_path(report.root, record["toolchain"], name)
        old = read_json(path)
        report.changes += _changes(name, old, record)
        if old != record or path.read_text() != dumps(record) + "\n":
            write_json(path, record)
        problems += _problems(name, record)
    old_baseline = read_baseline(report.root)
    old_count = None if old_baseline is None else old_baseline.get("limit_problems")
    known = set((old_baseline or {}).get("problems", []))
    report.unaccepted = [] if accept_limits else [p for p in problems if p not in known]
    problems = [p for p in problems if p not in report.unaccepted]
    if old_baseline is None or sorted(old_baseline.get("problems", [])) != sorted(problems):
        write_baseline(report.root, report.toolchain.id, problems)
        report.changes.append(f"baseline: {old_count if old_count is not None else 'none'} -> {len(problems)} "
                              f"limit problems")


def _changes(name: str, old: dict | None, new: dict) -> list[str]:
    """What rewriting one record changes, one line per symbol x SM."""
    if old is None:
        sms = max((len(k["sms"]) for k in new["kernels"].values()), default=0)
        return [f"{name}: new record ({len(new['kernels'])} symbols x {sms} SMs)"]
    lines = []
    if old.get("inputs_sha256") != new["inputs_sha256"]:
        lines.append(f"{name}: inputs {str(old.get('inputs_sha256'))[:12]} -> {new['inputs_sha256'][:12]}")
    old_kernels = old.get("kernels", {})
    for role in sorted(set(old_kernels) - set(new["kernels"])):
        lines.append(f"{name}/{role}: removed")
    for role, kernel in sorted(new["kernels"].items()):
        before = old_kernels.get(role)
        if before is None:
            lines.append(f"{name}/{role}: new ({len(kernel['sms'])} SMs)")
            continue
        if diffs := _diff(before, kernel, KERNEL_FIELDS):
            lines.append(f"{name}/{role}: {', '.join(diffs)}")
        for sm in sorted(set(before.get("sms", {})) | set(kernel["sms"]), key=sm_number):
            a, b = before.get("sms", {}).get(sm), kernel["sms"].get(sm)
            if a is None or b is None:
                lines.append(f"{name}/{role} {sm}: {'new' if a is None else 'removed'}")
            elif diffs := _diff(a, b, SM_FIELDS):
                lines.append(f"{name}/{role} {sm}: {', '.join(diffs)}")
    return lines


def _rel(path: Path) -> str:
    """A path relative to the working directory where possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def orphan_records(loaded, root: Path | None = None) -> list[str]:
    """Committed record files (of any toolchain) whose entry is no CUDA gate-5 entry of the contract."""
    root = root or records_root(loaded)
    names = {e.name for e in _entries(loaded)}
    return [f"{_rel(path)}: a record for `{name}`, which is no CUDA gate-5 entry of the contract: {UPDATE_HINT}"
            for toolchain in recorded_toolchains(root) for name, path in record_files(root, toolchain).items()
            if name not in names]
