"""How gate 5, compile failures and receipts print: shared by `check` and `records`."""

from __future__ import annotations

from rich.table import Table

from kcontract.records.gate5 import Gate5Report, sm_number
from kcontract.records.limits import SOURCE, limits_for
from kcontract.toolchain.build import Failure

SHOWN = 12  # detail lines per kind before "... and N more"


def compile_failures(failures: list[Failure]) -> list[str]:
    """One message per unit and log: the SMs it fails on, who uses it, and the NVRTC log."""
    grouped: dict[tuple, list[str]] = {}
    for failure in failures:
        grouped.setdefault((failure.unit.label, failure.unit.users, failure.log), []).append(failure.sm)
    return [f"{label} does not compile for {', '.join(sorted(sms, key=sm_number))} (used by {', '.join(users)}); "
            f"NVRTC says:\n{log.strip()}" for (label, users, log), sms in grouped.items()]


def capped(lines: list[str], limit: int = SHOWN) -> list[str]:
    """At most `limit` lines and a count of the rest."""
    return lines[:limit] + ([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])


def gate5_lines(report: Gate5Report) -> list[str]:
    """What is wrong with gate 5, one line each: stale or missing records, new limit problems, controls."""
    lines = [f"gate 5: {e}" for e in report.errors]
    grouped: dict[tuple, list] = {}
    for row in report.rows:
        if row.status != "ok":
            grouped.setdefault((row.owner, row.status, row.detail), []).append(row)
    lines += capped([f"gate 5: {owner} {_roles_on(rows)}: {status} record: {detail}"
                     for (owner, status, detail), rows in grouped.items()])
    lines += [f"gate 5: {n}" for n in report.notes]
    if len(report.problems) > report.baseline:
        lines += capped([f"gate 5: new limit problem: {p}" for p in report.new_problems] or
                        [f"gate 5: {len(report.problems)} limit problems, baseline {report.baseline}"])
    for control in report.missed_controls:
        lines.append(f"gate 5: control {control.name} missed: its kernel standing in for {control.entry} is "
                     f"neither stale nor over a limit{(' (' + control.note + ')') if control.note else ''}")
    return lines


def _roles_on(rows: list) -> str:
    """`round, scale on sm_80, sm_90`."""
    roles = sorted({r.role for r in rows})
    sms = sorted({r.sm for r in rows}, key=sm_number)
    return f"{', '.join(roles)} on {', '.join(sms)}"


def control_lines(report: Gate5Report) -> list[str]:
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


def gate5_summary(report: Gate5Report) -> str:
    """`14 current, 0 stale, 0 missing, 0 limit problems (baseline 0)`."""
    stale = report.count("stale") + len(report.notes)
    return (f"{report.count('ok')} current, {stale} stale, {report.count('missing')} missing, "
            f"{len(report.problems)} limit problems (baseline {report.baseline})")


def records_table(report: Gate5Report) -> Table:
    """Every entry symbol x SM with its record facts and status."""
    table = Table(title=f"launch records ({report.toolchain})")
    for column in ("entry/symbol", "SM", "regs", "static smem", "dyn smem", "stack", "spills st/ld", "opt-in",
                   "blocks/SM", "status", "problems"):
        table.add_column(column)
    for row in report.rows:
        f = row.facts or {}
        table.add_row(f"{row.owner}/{row.role}", row.sm, str(f.get("registers", "")), str(f.get("static_smem", "")),
                      str(row.dynamic_smem), str(f.get("stack", "")),
                      f"{f.get('spill_stores', '')}/{f.get('spill_loads', '')}", "yes" if f.get("opt_in") else "no",
                      str(f.get("blocks_per_sm", "")), row.status, "; ".join(row.problems))
    return table


def limits_table(sms: list[str]) -> Table:
    """Each target SM's limits, with their source in the caption."""
    table = Table(title="SM limits", caption=f"source: {SOURCE}")
    for column in ("SM", "threads/block", "threads/SM", "blocks/SM", "regs/SM", "regs/block", "regs/thread",
                   "smem/SM", "max smem/block (opt-in)", "reserved smem/block"):
        table.add_column(column)
    for sm in sms:
        lim = limits_for(sm)
        table.add_row(sm, str(lim.max_threads_per_block), str(lim.max_threads_per_sm), str(lim.max_blocks_per_sm),
                      str(lim.registers_per_sm), str(lim.registers_per_block), str(lim.registers_per_thread),
                      str(lim.smem_per_sm), str(lim.smem_per_block_optin), str(lim.reserved_smem_per_block))
    return table
