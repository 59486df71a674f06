"""A receipt as the markdown a pull request wants: its rows by entry and gate, the runs that wrote them, the
controls, mutation scores, the bench and its rooflines."""

from __future__ import annotations

from pathlib import Path

from kcontract.profiling import SPLIT


def _sharding(receipt: dict) -> list[str]:
    """A line saying the receipt is one shard (partial) or merged from shards, with each shard's seconds."""
    covers = receipt.get("covers") or {}
    if covers.get("shard"):
        return ["", (f"Shard {covers['shard']} of the contract only: merge every shard's receipt with "
                     f"`kcontract receipt merge`.")]
    shards = receipt.get("shards") or []
    if not shards:
        return []
    return ["", f"Merged from {len(shards)} shards (wall s: "
                + ", ".join(f"{s.get('shard')} {s.get('wall_s')}" for s in shards) + ")."]


def _runs(receipt: dict) -> list[str]:
    """A line naming the runs whose rows the receipt holds, where there are several."""
    runs = receipt.get("runs") or []
    if len(runs) < 2:
        return []
    return ["", "Rows from " + str(len(runs)) + " runs: " + "; ".join(
        f"{r.get('mode')} at {str((r.get('git') or {}).get('commit'))[:12]} ({r.get('created')}, {r.get('rows')} of "
        f"{r.get('of')} rows, {r.get('wall_s')} s{_spent(r)})" for r in runs) + "."]


def _spent(run: dict) -> str:
    """How warm a run's caches were and where its task seconds went, where the run recorded them."""
    cache = (run.get("references") or {}).get("cache")
    staged = run.get("task_seconds") or {}
    split = ", ".join(f"{name} {staged[name + '_s']}" for name in SPLIT if name + "_s" in staged)
    return (f", references {cache}" if cache else "") + (f"; task s: {split}" if split else "")


def _coverage(receipt: dict) -> list[str]:
    """A line per entry whose kernel lines `kcontract coverage` counted."""
    found = []
    for name, c in sorted((receipt.get("coverage") or {}).items()):
        lines, branches = c.get("lines") or {}, c.get("branches") or {}
        counted = (lines.get("reachable") or 0) - (lines.get("argued") or 0)
        missed = ", ".join(map(str, (c.get("missed_lines") or [])[:12]))
        found.append(f"Coverage, {name}: lines {lines.get('executed')} of {counted} ({lines.get('pct')} %)"
                     f"{', ' + str(lines['argued']) + ' argued' if lines.get('argued') else ''}, branches "
                     f"{branches.get('taken')} of {branches.get('reachable')} on {c.get('sm')}"
                     f"{'; missed lines ' + missed if missed else ''}"
                     f"{', measured at ' + c['measured_at'][:7] if c.get('measured_at') else ''}")
    return found


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


def receipt_markdown(receipt: dict, plots: list[tuple[str, bool]] = (), redraw: str = "") -> str:
    """The receipt as the markdown a pull request wants; `plots`: its rooflines' links, each with whether it was
    drawn from this receipt's bench rows (`redraw`: the command that draws them again)."""
    env = receipt.get("environment", {})
    git = receipt.get("git") or {}
    commit = f"{str(git.get('commit'))[:12]}{' (dirty tree)' if git.get('dirty') else ''}"
    lines = [(f"**kcontract receipt** ({receipt.get('created', '?')}, contract `{receipt.get('contract')}` at "
              f"{commit}, seed {receipt.get('seed')}, {receipt.get('device', '?')}, {receipt.get('wall_s', '?')} s)"),
             "", "Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), *_sharding(receipt), *_runs(receipt), "",
             "| entry | gate | verdict | checked | decided | bit-equal | within | failures | s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for entry in receipt.get("entries", []):
        name = entry["task"]["name"]
        if entry["status"] != "ran":
            lines.append(f"| {name} | all | {entry['status']} | | | | | | |")
        for gate, r in sorted(entry.get("gates", {}).items()):
            verdict = "pass" if r["passed"] else "FAIL"
            parts = (r.get("facts") or {}).get("by_output") or {"": r}
            for output, c in parts.items():  # one row per output buffer where a gate checks several
                passed = verdict if not output else ("pass" if c["failures"] == 0 else "FAIL")
                lines.append(f"| {name} | {gate}{' ' + output if output else ''} | {passed} | {c['checked']} | "
                             f"{c['decided']} | {c['bit_equal']} | {c['within']} | {c['failures']} | "
                             f"{r['seconds']:.1f} |")
    controls = receipt.get("controls", [])
    if controls:
        lines += ["", "| control | red at |", "|---|---|"]
        for c in controls:
            red = [g for g, r in sorted(c.get("gates", {}).items()) if not r["passed"]]
            lines.append(f"| {c['task']['name']} | {' '.join(red) or c['status']} |")
    lines += ["", "```", receipt.get("summary", ""), "```"]
    for entry_name, m in sorted((receipt.get("mutation") or {}).items()):
        s = m.get("by_status", {})
        lines.append(f"Mutation, {entry_name}: {m.get('mutants')} mutants, {s.get('stillborn', 0)} do not compile, "
                     f"{s.get('equivalent', 0)} equivalent on {m.get('sm')}, {s.get('killed', 0)} killed, "
                     f"{s.get('survived', 0)} survived"
                     + (f", {s['uncovered']} on lines no case executes" if s.get("uncovered") else "")
                     + f" ({m.get('score_pct')} %)"
                     + (f", measured at {m['measured_at'][:7]}" if m.get("measured_at") else ""))
    lines += _coverage(receipt)
    bench = receipt.get("bench") or []
    if bench:
        ceiling = receipt.get("bench_ceiling", {})
        mma = (f"; bf16 mma.sync ceiling {ceiling['mma_tflops']:.0f} TFLOP/s (compute-bound rows: useful and issued "
               f"tensor work against it)" if ceiling.get("mma_tflops") else "")
        lines += ["", (f"Speed (GPU microseconds, median of CUDA-event timings with L2 flushed; read ceiling "
                       f"{ceiling.get('read_gbps', 0):.0f} GB/s, device-to-device copy "
                       f"{ceiling.get('copy_gbps', 0):.0f} GB/s counted both ways{mma}):"), "",
                  "| call | size | us | graph us | GB/s | of ceiling | TFLOP/s | peer | peer us | peer TFLOP/s |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in bench:
            peer_us = r.get("peer_us") if r.get("peer_us") is not None else ""
            share = (f"{100 * r['mma_ratio']:.0f} % mma, {100 * r['issued_ratio']:.0f} % issued" if "mma_ratio" in r
                     else f"{100 * r.get('ratio', 0):.0f} %")
            size = ", ".join(f"{k} {v}" for k, v in (r.get("size") or {}).items())
            lines.append(f"| {r.get('call', '')} | {size} | {r.get('us')} | {r.get('graph_us')} | {r.get('gbps')} | "
                         f"{share} | {r.get('tflops', '')} | {r.get('peer', '')} | {peer_us} | "
                         f"{r.get('peer_tflops') or ''} |")
        now = (receipt.get("git") or {}).get("commit")
        earlier = {}
        for r in bench:
            if r.get("measured_at") and r["measured_at"] != now:
                earlier.setdefault(r["measured_at"][:7], []).append(r.get("entry", ""))
        for commit, names in sorted(earlier.items()):
            lines += ["", f"Rows of {', '.join(dict.fromkeys(names))} measured at {commit} (kernel source unchanged "
                          f"since)."]
    lines += _plots(list(plots), redraw)
    kernels = {(e.get("kernel") or {}).get("toolchain") for e in receipt.get("entries", []) if e.get("kernel")}
    if kernels:
        lines += ["", f"Cubins built by: {', '.join(sorted(k for k in kernels if k))}"]
    return "\n".join(lines)
