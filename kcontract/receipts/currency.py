"""`receipt check` and `check`: every receipt beside a contract judged row by row.

Stale, missing, orphaned and failed rows fail, grouped by cause, each line naming its rows and the command that
refreshes them. Rows judged by an earlier checker give one line with their count; they fail only under
`--strict` or `require_receipt: strict`. Rows current by machine code say so. A receipt is invalid when it is no
receipt, has the earlier whole-contract form, covers one shard, or ran without a GPU although the contract's
kernels need one. `require_receipt` demands a receipt with rows. An entry's `coverage` floor is held to the
receipt's coverage of its current kernel source.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.receipts.carried import entry_source_sha256
from kcontract.receipts.plots import receipt_plots, redraw_command
from kcontract.receipts.judge import CURRENT, FAILED, MISSING, ORPHANED, STALE, RowJudgement, judge_rows
from kcontract.receipts.machine_code import MachineCode
from kcontract.receipts.mutation_scores import mutation_findings
from kcontract.receipts.receipt import NewerReceipt, NotAReceipt, Receipt, ReceiptError
from kcontract.receipts.schema import RECEIPTS_DIR, receipt_name

SHOWN_NAMES = 6  # rows named in a line before "and N more"


@dataclass
class ReceiptReport:
    """Every receipt of a contract judged: failing lines, notes, and counts of rows by state."""

    receipts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each, "receipts/x.json: ..."
    notes: list[str] = field(default_factory=list)  # lines that inform without failing
    rows: Counter = field(default_factory=Counter)  # state -> rows; also "machine code" and "earlier checker"
    invalid: int = 0
    strict: bool = False
    missing: bool = False  # the contract requires a receipt and has none with rows

    @property
    def passed(self) -> bool:
        """No failing line."""
        return not self.problems

    @property
    def stale(self) -> list[str]:
        """The failing lines (the name `check` has always printed them under)."""
        return self.problems

    def summary(self) -> str:
        """`no receipts`, or `1 receipt: 57 of 58 rows current (2 by machine code), 1 stale; 58 judged by an
        earlier kcontract`."""
        if not self.receipts:
            return "no receipts" + ("; the contract requires one" if self.missing else "")
        n = len(self.receipts)
        total = sum(self.rows[s] for s in (CURRENT, STALE, MISSING, FAILED))
        text = f"{n} receipt{'s' if n != 1 else ''}: " + (f"{self.rows[CURRENT]} of {total} rows current" if total
                                                           else "no rows")
        if self.rows["machine code"]:
            text += f" ({self.rows['machine code']} by machine code)"
        text += "".join(f", {self.rows[s]} {s}" for s in (STALE, MISSING, ORPHANED, FAILED) if self.rows[s])
        text += f", {self.invalid} invalid" if self.invalid else ""
        if self.rows["earlier checker"]:
            text += f"; {self.rows['earlier checker']} judged by an earlier kcontract"
            text += " (failing: strict)" if self.strict else ""
        return text + ("; the contract requires one" if self.missing else "")


def needs_gpu(loaded) -> bool:
    """Whether the contract's kernels run on a GPU (CUDA kernels or Python kernels on device arrays)."""
    kernels = [e.kernel for e in loaded.entries] + [c.kernel for c in loaded.controls]
    return any(k.compiled is not None or k.device for k in kernels)


def refresh(loaded, receipt: Path | str, recheck: bool = False) -> str:
    """The command that refreshes a receipt's rows (paths as seen from here), where it must run, and committing
    it."""
    where = " on a GPU" if needs_gpu(loaded) else ""
    flags = "--stale --recheck" if recheck else "--stale"
    return (f"run `kcontract run --contract {_here(loaded.path)} {flags} --receipt {_here(receipt)}`{where} and "
            f"commit it")


def _here(path: Path | str) -> str:
    """A path relative to the working directory where it lies below it, else absolute."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return os.fspath(path)


def check_receipts(loaded, strict: bool = False, built=None) -> ReceiptReport:
    """Judge every receipt of this contract beside it (another contract's receipts are its own `check`'s);
    `built`: the contract's current build, reused for machine-code comparisons."""
    base = Path(loaded.path).resolve().parent
    strict = strict or loaded.model.require_receipt == "strict"
    report = ReceiptReport(strict=strict)
    folder = base / RECEIPTS_DIR
    covered = False
    with MachineCode(loaded, built) as machine:
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            covered = _check(report, loaded, path, machine) or covered
    if not covered and loaded.model.require_receipt:
        report.missing = True
        report.problems.append(f"{Path(loaded.path).name} requires a receipt and none with rows covers it: run "
                               f"`kcontract run --contract {_here(loaded.path)} --receipt "
                               f"{_here(base / receipt_name(Path(loaded.path), 'GPU'))}` on a GPU and commit it")
    return report


def _check(report: ReceiptReport, loaded, path: Path, machine: MachineCode) -> bool:
    """Judge one file under receipts/ into the report, unless it is a receipt of another contract; whether it
    covers the contract with rows."""
    shown = f"{RECEIPTS_DIR}/{path.name}"
    receipt, why = _read(loaded, path)
    if receipt is not None and receipt.contract != Path(loaded.path).name:
        return False
    report.receipts.append(shown)
    why = why or _invalid(receipt, loaded, path)
    if why:
        report.invalid += 1
        report.problems.append(f"{shown}: {why}")
        return False
    _judge(report, loaded, receipt, path, machine)
    return True


def _read(loaded, path: Path) -> tuple[Receipt | None, str]:
    """The receipt at `path`, or why the file is no receipt this kcontract reads."""
    try:
        return Receipt.read(path), ""
    except NotAReceipt as error:
        return None, f"{error.reason}: {refresh(loaded, _here(path))}"
    except NewerReceipt as error:
        return None, f"{error.reason}: {error.advice}"
    except ReceiptError as error:
        return None, error.reason


def _invalid(receipt: Receipt, loaded, path: Path) -> str:
    """Why a receipt is invalid as a whole ('' where it is not)."""
    shown = _here(path)
    if not receipt.has_rows:
        return (f"a receipt of the earlier whole-contract form: turn it into rows with `kcontract receipt upgrade "
                f"{shown}`, then commit it")
    if receipt.lacks("entries", "controls"):
        return f"invalid: it holds no lists of rows (entries, controls): {refresh(loaded, path)}"
    if receipt.is_shard:
        return (f"invalid: shard {receipt.shard} of {receipt.contract}, not the whole contract: merge every shard's "
                f"receipt with `kcontract receipt merge A.json B.json ... -o "
                f"{receipt_name(Path(loaded.path), '{gpu}')}` and commit the merged receipt instead")
    if needs_gpu(loaded) and receipt.device != "gpu":
        return (f"invalid: ran on {receipt.device or 'an unknown device'}, and {receipt.contract} has kernels that "
                f"run on a GPU: {refresh(loaded, shown)}")
    return ""


def _judge(report: ReceiptReport, loaded, receipt: Receipt, path: Path, machine: MachineCode) -> None:
    """Count one receipt's rows by state; failing lines grouped by state and cause; notes likewise; its coverage
    floors, rooflines and rows judged by an earlier kcontract."""
    shown = f"{RECEIPTS_DIR}/{path.name}"
    judged = judge_rows(loaded, receipt, machine)
    for (state, cause), rows in _groups(report, judged).items():
        if state == "machine code":
            report.notes.append(f"{shown}: {_rows(len(rows))} current by machine code ({_names(rows)}): {cause}")
        else:
            report.problems.append(f"{shown}: {_rows(len(rows))} {state} ({_names(rows)}): {_what(state, cause)}"
                                   f"{refresh(loaded, path)}")
    report.problems += [f"{shown}: {line}: run `kcontract coverage {name} --contract {_here(loaded.path)} --receipt "
                        f"{_here(path)}` on a GPU and commit it" for name, line in floor_problems(loaded, receipt)]
    _mutation(report, loaded, receipt, path)
    stale = [svg.name for svg, current in receipt_plots(path, receipt) if not current]
    if stale:
        report.problems.append(f"{shown}: {len(stale)} of its rooflines drawn from other bench rows "
                               f"({', '.join(stale)}): run `{redraw_command(_here(path))}` and commit them")
    _earlier(report, loaded, judged, path)


def _groups(report: ReceiptReport, judged: list[RowJudgement]) -> dict[tuple[str, str], list[RowJudgement]]:
    """Count the rows by state into the report; the rows not current, and those current by machine code, grouped
    by state and cause."""
    groups: dict[tuple[str, str], list[RowJudgement]] = {}
    for j in judged:
        report.rows[j.state] += 1
        if j.state != CURRENT:
            groups.setdefault((j.state, j.cause), []).append(j)
        elif j.machine:
            report.rows["machine code"] += 1
            groups.setdefault(("machine code", j.machine), []).append(j)
    return groups


def _what(state: str, cause: str) -> str:
    """What a failing group's line says of its rows, up to the command that refreshes them."""
    return {STALE: f"{cause}: ", MISSING: "no row yet: ", ORPHANED: "the contract has no such entry or control (a "
            "refresh drops the row): ", FAILED: f"its outcome failed ({cause}): fix it, then "}[state]


def _mutation(report: ReceiptReport, loaded, receipt: Receipt, path: Path) -> None:
    """A failing line per mutation score below the floor; one note naming the compiled entries with none of their
    kernel source as it is."""
    shown, unscored, low = f"{RECEIPTS_DIR}/{path.name}", *mutation_findings(loaded, receipt)
    command = f"`kcontract mutate {{}} --contract {_here(loaded.path)} --receipt {_here(path)}`"
    report.problems += [f"{shown}: {why}; then run {command.format(name)} on a GPU and commit it" for name, why in low]
    if unscored:
        one = len(unscored) == 1
        report.notes.append(f"{shown}: {len(unscored)} compiled entr{'y has' if one else 'ies have'} no mutation "
                            f"score of {'its' if one else 'their'} kernel source as it is ({_names(unscored)}): run "
                            f"{command.format('ENTRY')} on a GPU for each and commit it")


def _earlier(report: ReceiptReport, loaded, judged: list[RowJudgement], path: Path) -> None:
    """One line for the rows judged by an earlier kcontract: failing under strict, else a note."""
    earlier = [j for j in judged if j.earlier and j.state != ORPHANED]
    if not earlier:
        return
    report.rows["earlier checker"] += len(earlier)
    causes = sorted({j.earlier for j in earlier})
    line = (f"{RECEIPTS_DIR}/{path.name}: {_rows(len(earlier))} of {len(judged)} judged by an earlier kcontract "
            f"({causes[0]}{f' and {len(causes) - 1} more' if len(causes) > 1 else ''}): "
            f"{refresh(loaded, path, recheck=True).replace('run `', 'refresh them with `', 1)}")
    (report.problems if report.strict else report.notes).append(line)


def floor_problems(loaded, receipt: Receipt) -> list[tuple[str, str]]:
    """(entry, why) for each entry whose `coverage` floors the receipt's coverage of its current source misses (its
    argued lines and outcomes as the contract argues them now), or that has no coverage of its current source."""
    found = []
    for entry in loaded.entries:
        if entry.coverage is None:
            continue
        record = receipt.coverage_of(entry.name)
        if record is None or record.get("source_sha256") != entry_source_sha256(loaded, entry.name):
            found.append((entry.name, f"coverage of {entry.name} not measured for its kernel source as it is"))
            continue
        floor = entry.coverage
        pct, missed = _share(record, "lines", "executed", "missed_lines", "argued_lines", set(floor.argued_lines))
        if pct + 1e-9 < floor.lines:
            found.append((entry.name, f"{entry.name} executes {pct:.1f} % of its reachable kernel lines, below its "
                                      f"floor of {floor.lines:g} %: lines {', '.join(map(str, missed[:12]))} "
                                      f"run under no case; add a case that runs them or argue them in its coverage"))
        pct, missed = _share(record, "branches", "taken", "missed_branches", "argued_branches",
                             set(floor.argued_outcomes))
        if floor.branches is not None and pct + 1e-9 < floor.branches:
            found.append((entry.name, f"{entry.name} takes {pct:.1f} % of its reachable `if` outcomes, below its "
                                      f"floor of {floor.branches:g} %: {', '.join(map(str, missed[:12]))} taken by "
                                      f"no case; add a case that takes them or argue them in its coverage"))
    return found


def _share(record: dict, kind: str, done: str, missed: str, argued_then: str, argued_now: set) -> tuple[float, list]:
    """The share of a receipt's reachable lines or outcomes run, with those the contract argues now left out, and
    what no case ran that is not argued."""
    not_run = set(record.get(missed) or []) | set(record.get(argued_then) or [])
    counts = record.get(kind) or {}
    counted = (counts.get("reachable") or 0) - len(not_run & argued_now)
    pct = 100.0 * (counts.get(done) or 0) / counted if counted else 100.0
    return pct, sorted(not_run - argued_now, key=lambda x: (isinstance(x, str), x))


def _rows(n: int) -> str:
    return f"{n} row{'s' if n != 1 else ''}"


def _names(rows: list[RowJudgement] | list[str]) -> str:
    """The first SHOWN_NAMES rows (or names), then how many more."""
    shown = [r if isinstance(r, str) else r.shown for r in rows[:SHOWN_NAMES]]
    return ", ".join(shown) + (f" and {len(rows) - SHOWN_NAMES} more" if len(rows) > SHOWN_NAMES else "")
