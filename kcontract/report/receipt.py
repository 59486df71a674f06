"""A receipt as the markdown a pull request wants: its rows by entry and gate, the runs that wrote them, the
controls, mutation scores, coverage, the bench and its rooflines."""

from __future__ import annotations

from pathlib import Path

from kcontract.profiling import SPLIT
from kcontract.receipts.receipt import Receipt
from kcontract.receipts.rows import cache_state

GATE_HEADER = ["| entry | gate | verdict | checked | decided | bit-equal | within | failures | s |",
               "|---|---|---|---|---|---|---|---|---|"]
BENCH_HEADER = ["| entry | call | size | us | graph us | GB/s | of ceiling | TFLOP/s | peer | peer us | peer TFLOP/s |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]


def receipt_markdown(receipt: Receipt, plots: list[tuple[str, bool]] = (), redraw: str = "") -> str:
    """The receipt as the markdown a pull request wants; `plots`: its rooflines' links, each with whether it was
    drawn from this receipt's bench rows (`redraw`: the command that draws them again)."""
    lines = [_header(receipt), "", "Environment: " + ", ".join(f"{k} {v}" for k, v in receipt.environment.items()),
             *_sharding(receipt), *_runs(receipt), "", *GATE_HEADER]
    for entry in receipt.entries:
        lines += _entry_lines(entry)
    lines += _controls(receipt)
    lines += ["", "```", receipt.summary or "", "```"]
    lines += [_mutation_line(name, score) for name, score in sorted(receipt.mutation.items())]
    lines += _coverage(receipt)
    lines += _bench(receipt)
    lines += _plots(list(plots), redraw)
    lines += _cubins(receipt)
    return "\n".join(lines)


def _or(value, default: str):
    """`value`, or `default` where the receipt has none."""
    return default if value is None else value


def _header(receipt: Receipt) -> str:
    """The first line: when, which contract at which commit, the seed, the device and how long."""
    commit = f"{str(receipt.commit)[:12]}{' (dirty tree)' if receipt.git.get('dirty') else ''}"
    return (f"**kcontract receipt** ({_or(receipt.created, '?')}, contract `{receipt.contract}` at {commit}, seed "
            f"{receipt.seed}, {_or(receipt.device, '?')}, {_or(receipt.wall_s, '?')} s)")


def _sharding(receipt: Receipt) -> list[str]:
    """A line saying the receipt is one shard (partial) or merged from shards, with each shard's seconds."""
    if receipt.shard:
        return ["", (f"Shard {receipt.shard} of the contract only: merge every shard's receipt with "
                     f"`kcontract receipt merge`.")]
    if not receipt.shards:
        return []
    return ["", f"Merged from {len(receipt.shards)} shards (wall s: "
                + ", ".join(f"{s.get('shard')} {s.get('wall_s')}" for s in receipt.shards) + ")."]


def _runs(receipt: Receipt) -> list[str]:
    """A line naming the runs the receipt keeps (those that own its rows, and its whole runs from a cold cache and
    a warm one), where there are several."""
    runs = receipt.runs
    if len(runs) < 2:
        return []
    owners = {row.get("ran", {}).get("run") for row in receipt.rows().values()}
    return ["", "Runs: " + "; ".join(
        f"{r.get('mode')}, {cache_state(r)} caches, at {str((r.get('git') or {}).get('commit'))[:12]} "
        f"({r.get('created')}, {r.get('rows')} of {r.get('of')} rows, {r.get('wall_s')} s{_spent(r)}"
        f"{'' if r.get('id') in owners else '; its rows since run again'})" for r in runs) + "."]


def _spent(run: dict) -> str:
    """How warm a run's caches were and where its task seconds went, where the run recorded them."""
    cache = (run.get("references") or {}).get("cache")
    staged = run.get("task_seconds") or {}
    split = ", ".join(f"{name} {staged[name + '_s']}" for name in SPLIT if name + "_s" in staged)
    return (f", references {cache}" if cache else "") + (f"; task s: {split}" if split else "")


def _entry_lines(entry: dict) -> list[str]:
    """An entry's rows of the gate table: one per gate, or per output buffer where a gate checks several."""
    name = entry["task"]["name"]
    lines = [f"| {name} | all | {entry['status']} | | | | | | |"] if entry["status"] != "ran" else []
    for gate, result in sorted(entry.get("gates", {}).items()):
        verdict = "pass" if result["passed"] else "FAIL"
        parts = (result.get("facts") or {}).get("by_output") or {"": result}
        for output, c in parts.items():
            passed = verdict if not output else ("pass" if c["failures"] == 0 else "FAIL")
            lines.append(f"| {name} | {gate}{' ' + output if output else ''} | {passed} | {c['checked']} | "
                         f"{c['decided']} | {c['bit_equal']} | {c['within']} | {c['failures']} | "
                         f"{result['seconds']:.1f} |")
    return lines


def _controls(receipt: Receipt) -> list[str]:
    """The controls' table: the gates each is red at, else its status."""
    if not receipt.controls:
        return []
    lines = ["", "| control | red at |", "|---|---|"]
    for c in receipt.controls:
        red = [g for g, r in sorted(c.get("gates", {}).items()) if not r["passed"]]
        lines.append(f"| {c['task']['name']} | {' '.join(red) or c['status']} |")
    return lines


def _mutation_line(entry_name: str, m: dict) -> str:
    """An entry's mutation score in a line."""
    s = m.get("by_status", {})
    return (f"Mutation, {entry_name}: {m.get('mutants')} mutants, {s.get('stillborn', 0)} do not compile, "
            f"{s.get('equivalent', 0)} equivalent on {m.get('sm')}, {s.get('killed', 0)} killed, "
            f"{s.get('survived', 0)} survived"
            + (f", {s['uncovered']} on lines no case executes" if s.get("uncovered") else "")
            + f" ({m.get('score_pct')} %)"
            + (f", measured at {m['measured_at'][:7]}" if m.get("measured_at") else ""))


def _coverage(receipt: Receipt) -> list[str]:
    """A line per entry whose kernel lines `kcontract coverage` counted."""
    return [_coverage_line(name, c) for name, c in sorted(receipt.coverage.items())]


def _coverage_line(name: str, c: dict) -> str:
    """An entry's coverage in a line."""
    lines, branches = c.get("lines") or {}, c.get("branches") or {}
    counted = (lines.get("reachable") or 0) - (lines.get("argued") or 0)
    missed = ", ".join(map(str, (c.get("missed_lines") or [])[:12]))
    return (f"Coverage, {name}: lines {lines.get('executed')} of {counted} ({lines.get('pct')} %)"
            f"{', ' + str(lines['argued']) + ' argued' if lines.get('argued') else ''}, branches "
            f"{branches.get('taken')} of {branches.get('reachable')} on {c.get('sm')}"
            f"{'; missed lines ' + missed if missed else ''}"
            f"{', measured at ' + c['measured_at'][:7] if c.get('measured_at') else ''}")


def _bench(receipt: Receipt) -> list[str]:
    """The bench: its ceilings, a table row per call, and the commits rows measured earlier were measured at."""
    if not receipt.bench:
        return []
    ceiling = receipt.bench_ceiling
    mma = (f"; bf16 mma.sync ceiling {ceiling['mma_tflops']:.0f} TFLOP/s (compute-bound rows: useful and issued "
           f"tensor work against it)" if ceiling.get("mma_tflops") else "")
    return ["", (f"Speed (GPU microseconds, median of CUDA-event timings with L2 flushed; read ceiling "
                 f"{ceiling.get('read_gbps', 0):.0f} GB/s, device-to-device copy "
                 f"{ceiling.get('copy_gbps', 0):.0f} GB/s counted both ways{mma}):"), "", *BENCH_HEADER,
            *map(_bench_row, receipt.bench), *_measured_earlier(receipt)]


def _bench_row(r: dict) -> str:
    """One bench row of the table."""
    peer_us = r.get("peer_us") if r.get("peer_us") is not None else ""
    share = (f"{100 * r['mma_ratio']:.0f} % mma, {100 * r['issued_ratio']:.0f} % issued" if "mma_ratio" in r
             else f"{100 * r.get('ratio', 0):.0f} %")
    size = ", ".join(f"{k} {v}" for k, v in (r.get("size") or {}).items())
    return (f"| {r.get('entry', '')} | {r.get('call', '')} | {size} | {r.get('us')} | {r.get('graph_us')} | {r.get('gbps')} | {share} | "
            f"{r.get('tflops', '')} | {r.get('peer', '')} | {peer_us} | {r.get('peer_tflops') or ''} |")


def _measured_earlier(receipt: Receipt) -> list[str]:
    """A line per earlier commit that bench rows carried over were measured at, naming their entries."""
    earlier: dict[str, list[str]] = {}
    for r in receipt.bench:
        if r.get("measured_at") and r["measured_at"] != receipt.commit:
            earlier.setdefault(r["measured_at"][:7], []).append(r.get("entry", ""))
    return [line for commit, names in sorted(earlier.items()) for line in
            ("", f"Rows of {', '.join(dict.fromkeys(names))} measured at {commit} (kernel source unchanged since).")]


def _plots(plots: list[tuple[str, bool]], redraw: str) -> list[str]:
    """The rooflines beside the receipt, as image links; one drawn from other bench rows is named, with the command
    that draws it again."""
    if not plots:
        return []
    lines = ["", "Rooflines of the bench rows:", ""]
    lines += [f"![{Path(link).stem}]({link})" for link, _ in plots]
    stale = [Path(link).name for link, current in plots if not current]
    if stale:
        lines += ["", f"{', '.join(stale)} drawn from other bench rows than these: draw them again with `{redraw}`."]
    return lines


def _cubins(receipt: Receipt) -> list[str]:
    """A line naming the toolchains that built the entries' cubins."""
    kernels = {(e.get("kernel") or {}).get("toolchain") for e in receipt.entries if e.get("kernel")}
    if not kernels:
        return []
    return ["", f"Cubins built by: {', '.join(sorted(k for k in kernels if k))}"]
