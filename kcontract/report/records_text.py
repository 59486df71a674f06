"""How launch records (gate 5), compile failures and receipts print: shared by `check` and `records`."""

from __future__ import annotations

from rich.console import Console

from kcontract.records.record_check import RecordsReport
from kcontract.sms import sm_number
from kcontract.sms import SOURCE, limits_for
from kcontract.report.tabular import print_rows
from kcontract.toolchain.build import Failure

SHOWN = 12  # detail lines per kind before "... and N more"


def compile_failures(failures: list[Failure]) -> list[str]:
    """One message per unit and log: the SMs it fails on, who uses it, and the NVRTC log."""
    grouped: dict[tuple, list[str]] = {}
    for failure in failures:
        grouped.setdefault((failure.unit.shown, failure.unit.users, failure.log), []).append(failure.sm)
    return [f"{label} does not compile for {', '.join(sorted(sms, key=sm_number))} (used by {', '.join(users)}); "
            f"NVRTC says:\n{log.strip()}" for (label, users, log), sms in grouped.items()]


def capped(lines: list[str], limit: int = SHOWN) -> list[str]:
    """At most `limit` lines and a count of the rest."""
    return lines[:limit] + ([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])


def records_lines(report: RecordsReport) -> list[str]:
    """What is wrong with gate 5, one line each: stale or missing records, new limit problems, controls."""
    lines = [f"gate 5: {e}" for e in report.errors] + _record_lines(report)
    lines += [f"gate 5: {n}" for n in report.notes]
    if report.strict:
        lines += [f"gate 5: {f} (--strict-records)" for f in report.findings]
    if len(report.problems) > report.baseline:
        lines += capped([f"gate 5: new limit problem: {p}" for p in report.new_problems] or
                        [f"gate 5: {len(report.problems)} limit problems, baseline {report.baseline}"])
    return lines + [f"gate 5: control {c.name} missed: its kernel standing in for {c.entry} is neither stale nor "
                    f"over a limit{(' (' + c.note + ')') if c.note else ''}" for c in report.missed_controls]


def _record_lines(report: RecordsReport) -> list[str]:
    """Stale or missing records, a line per owner, status and detail, capped."""
    grouped: dict[tuple, list] = {}
    for row in report.rows:
        if row.status in ("stale", "missing"):
            grouped.setdefault((row.owner, row.status, row.detail), []).append(row)
    return capped([f"gate 5: {owner} {_roles_on(rows)}: {status} record: {detail}"
                   for (owner, status, detail), rows in grouped.items()])


def _roles_on(rows: list) -> str:
    """`round, scale on sm_80, sm_90`."""
    roles = sorted({r.role for r in rows})
    sms = sorted({r.sm for r in rows}, key=sm_number)
    return f"{', '.join(roles)} on {', '.join(sms)}"


def control_lines(report: RecordsReport) -> list[str]:
    """One line per gate-5 control: red as planted (and why) or missed."""
    lines = []
    for c in report.controls:
        if not c.red:
            lines.append(f"control {c.name} (gate 5, for {c.entry}): MISSED{': ' + c.note if c.note else ''}")
            continue
        why = []
        if c.limits:
            sms = sorted({p.split(" on ", 1)[1].split(":", 1)[0] for p in c.limits if " on " in p}, key=sm_number)
            why.append(f"{len(c.limits)} limit problems ({', '.join(sms)})")
        if c.stale:
            why.append(f"stale against {c.entry}'s record on {len(c.stale)} symbol x SM rows")
        lines.append(f"control {c.name} (gate 5, for {c.entry}): red as planted: {'; '.join(why)}")
    return lines


def records_summary(report: RecordsReport) -> str:
    """`14 current, 0 stale, 0 missing, 0 limit problems (baseline 0)`, with rows of no record of this toolchain and
    its findings where there are any."""
    stale = report.count("stale") + len(report.notes)
    unrecorded = report.count("unrecorded")
    return (f"{report.count('ok')} current, {stale} stale, {report.count('missing')} missing, "
            + (f"{unrecorded} unrecorded for {report.toolchain.id}, " if unrecorded else "")
            + f"{len(report.problems)} limit problems (baseline {report.baseline})"
            + (f", {len(report.findings)} toolchain finding{'s' if len(report.findings) != 1 else ''}"
               if report.findings else ""))


def finding_lines(report: RecordsReport) -> list[str]:
    """Gate 5's toolchain findings, one line each (failures under --strict-records, printed there instead)."""
    return [] if report.strict else [f"gate 5: {f}" for f in report.findings]


RECORD_COLUMNS = ("entry/symbol", "SM", "regs", "static smem", "dyn smem", "stack", "spills st/ld", "opt-in",
                  "blocks/SM", "status", "problems")
LIMIT_COLUMNS = ("SM", "threads/block", "threads/SM", "blocks/SM", "regs/SM", "regs/block", "regs/thread", "smem/SM",
                 "max smem/block (opt-in)", "reserved smem/block")


def print_records(console: Console, report: RecordsReport) -> None:
    """Every entry symbol x SM with its record facts and status."""
    rows = []
    for row in report.rows:
        f = row.facts or {}
        rows.append((f"{row.owner}/{row.role}", row.sm, f.get("registers", ""), f.get("static_smem", ""),
                     row.dynamic_smem, f.get("stack", ""), f"{f.get('spill_stores', '')}/{f.get('spill_loads', '')}",
                     "yes" if f.get("opt_in") else "no", f.get("blocks_per_sm", ""), row.status,
                     "; ".join(row.problems)))
    print_rows(console, f"launch records ({report.toolchain.id})", RECORD_COLUMNS, rows)


def print_limits(console: Console, sms: list[str]) -> None:
    """Each target SM's limits, with their source."""
    rows = []
    for sm in sms:
        lim = limits_for(sm)
        rows.append((sm, lim.max_threads_per_block, lim.max_threads_per_sm, lim.max_blocks_per_sm,
                     lim.registers_per_sm, lim.registers_per_block, lim.registers_per_thread, lim.smem_per_sm,
                     lim.smem_per_block_optin, lim.reserved_smem_per_block))
    print_rows(console, "SM limits", LIMIT_COLUMNS, rows, caption=f"source: {SOURCE}")
