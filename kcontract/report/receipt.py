"""A run's receipt: what ran where, every source it depended on with its sha256, per-gate counts, SUMMARY."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

import numpy as np

from kcontract import __version__
from kcontract.contract.paths import resolve_source
from kcontract.identity import file_sha256
from kcontract.provenance import checker, git_state, run_sources
from kcontract.receipts import KIND


def uses_gpu(loaded) -> bool:
    """Whether the contract's kernels run on a GPU (CUDA kernels or Python kernels on device arrays)."""
    kernels = [e.kernel for e in loaded.entries] + [c.kernel for c in loaded.controls]
    return any(k.cuda is not None or k.device for k in kernels)


def environment(gpu: bool, toolchain: dict | None = None) -> dict:
    """The host, Python and numpy, the toolchain that built the kernels (`nvrtc` its version); the GPU, its
    driver, runtime and CuPy (with the NVRTC CuPy itself loaded) only when the run used a GPU."""
    env = {"kcontract": __version__, "python": platform.python_version(), "numpy": np.__version__,
           "machine": platform.machine(), "cpus": os.cpu_count()}
    if toolchain:
        env |= {"toolchain": toolchain["id"], "nvrtc": toolchain["nvrtc"], "nvrtc_from": toolchain["nvrtc_from"],
                "headers": toolchain["headers"], "headers_from": toolchain["headers_from"]}
    if gpu:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        env |= {"cupy": cupy.__version__, "gpu": props["name"].decode(), "sm": f"sm_{props['major']}{props['minor']}",
                "driver": cupy.cuda.runtime.driverGetVersion(), "runtime": cupy.cuda.runtime.runtimeGetVersion(),
                "cupy_nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion()))}
    return env


def build_receipt(loaded, document: dict, seed: int, wall_s: float, extra: dict | None = None,
                  gpu: bool | None = None, shard: dict | None = None) -> dict:
    """The receipt: the run document plus provenance (sources, checker, git) and environment; a shard's receipt
    covers part of the contract (`shard`: its I/N, the split and the names it ran) until merged."""
    base = Path(loaded.path).resolve().parent
    gpu = uses_gpu(loaded) if gpu is None else gpu
    return {
        "kind": KIND,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "contract": Path(loaded.path).resolve().relative_to(base).as_posix(),
        "covers": {"entries": len(loaded.entries), "controls": len(loaded.controls), "partial": bool(shard),
                   **(shard or {})},
        "device": "gpu" if gpu else "cpu",
        "seed": seed,
        "wall_s": round(wall_s, 2),
        "git": git_state(base),
        "checker": checker(loaded),
        "environment": environment(gpu, document.get("toolchain")),
        "sources": {p: file_sha256(base / p) for p in run_sources(loaded)},
        **(extra or {}),
        **document,
    }


def carried_mutation(loaded, previous: dict) -> dict:
    """Mutation scores of a previous receipt whose entry still exists with the same kernel source (the sha256 the
    score names, else the previous receipt's `sources`); each marked with the commit it was measured at."""
    kept = {}
    for name, score in (previous.get("mutation") or {}).items():
        if _unchanged(loaded, previous, name, score.get("source_sha256")):
            kept[name] = {**score, "measured_at": _measured_at(score, previous)}
    return kept


def carried_bench(loaded, previous: dict, replaced: set[str] = frozenset()) -> list[dict]:
    """A previous receipt's bench rows of entries not in `replaced` whose kernel source is unchanged (as for
    mutation scores), each marked with the commit it was measured at."""
    return [{**row, "measured_at": _measured_at(row, previous)} for row in previous.get("bench") or []
            if row.get("entry") not in replaced and _unchanged(loaded, previous, row.get("entry"),
                                                                row.get("source_sha256"))]


def entry_source_sha256(loaded, name: str) -> str | None:
    """The sha256 of a CUDA entry's kernel source, or None for another entry."""
    entry = next((e for e in loaded.entries if e.name == name and e.kernel.cuda is not None), None)
    if entry is None:
        return None
    base = Path(loaded.path).resolve().parent
    return file_sha256(resolve_source(base, entry.kernel.cuda.source))


def _unchanged(loaded, previous: dict, name: str | None, then: str | None) -> bool:
    """The entry still exists with the kernel source it had when measured (`then`, else the previous receipt's
    `sources`)."""
    entry = next((e for e in loaded.entries if e.name == name and e.kernel.cuda is not None), None)
    if entry is None:
        return False
    base = Path(loaded.path).resolve().parent
    source = resolve_source(base, entry.kernel.cuda.source).resolve().relative_to(base).as_posix()
    then = then or (previous.get("sources") or {}).get(source)
    return then is not None and then == file_sha256(base / source)


def _measured_at(item: dict, previous: dict) -> str | None:
    """The commit a carried score or row was measured at: its own mark, else the previous receipt's commit."""
    return item.get("measured_at") or (previous.get("git") or {}).get("commit")


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


def receipt_markdown(receipt: dict) -> str:
    """The receipt as the markdown a pull request wants."""
    env = receipt.get("environment", {})
    git = receipt.get("git") or {}
    commit = f"{str(git.get('commit'))[:12]}{' (dirty tree)' if git.get('dirty') else ''}"
    lines = [(f"**kcontract receipt** ({receipt.get('created', '?')}, contract `{receipt.get('contract')}` at "
              f"{commit}, seed {receipt.get('seed')}, {receipt.get('device', '?')}, {receipt.get('wall_s', '?')} s)"),
             "", "Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), *_sharding(receipt), "",
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
                     f"{s.get('survived', 0)} survived ({m.get('score_pct')} %)"
                     + (f", measured at {m['measured_at'][:7]}" if m.get("measured_at") else ""))
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
    kernels = {(e.get("kernel") or {}).get("toolchain") for e in receipt.get("entries", []) if e.get("kernel")}
    if kernels:
        lines += ["", f"Cubins built by: {', '.join(sorted(k for k in kernels if k))}"]
    return "\n".join(lines)
