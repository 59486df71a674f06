"""A run written into its receipt: the run's record, its rows, and the rows it leaves as they were.

A whole run writes every row anew; `run --stale` writes the rows it re-ran over the receipt at the same path and
keeps the others; a shard writes its own rows (`covers.shard`). Mutation scores and bench rows of a receipt
already there carry over where the entry's kernel source is unchanged (receipts/carried.py).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

from kcontract import __version__
from kcontract.provenance import git_state
from kcontract.receipts.carried import carried_bench, carried_coverage, carried_mutation
from kcontract.receipts.receipt import Receipt
from kcontract.receipts.rows import make_row, merged_rows, now, run_id, with_cold_measures


def environment(gpu: bool, toolchain: dict | None = None) -> dict:
    """The host, Python and numpy, the toolchain that built the kernels (`nvrtc` its version); the GPU, its
    driver, runtime and CuPy (with the NVRTC CuPy itself loaded) only when the run used a GPU and CuPy runs on one
    here (a GPU contract's rows that need none, its launch records, run on any machine)."""
    from kcontract.launch import gpu_present

    env = {"kcontract": __version__, "python": platform.python_version(), "numpy": np.__version__,
           "machine": platform.machine(), "cpus": os.cpu_count()}
    if toolchain:
        env |= {"toolchain": toolchain["id"], "nvrtc": toolchain["nvrtc"], "nvrtc_from": toolchain["nvrtc_from"],
                "headers": toolchain["headers"], "headers_from": toolchain["headers_from"]}
    if gpu and gpu_present():
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        env |= {"cupy": cupy.__version__, "gpu": props["name"].decode(), "sm": f"sm_{props['major']}{props['minor']}",
                "driver": cupy.cuda.runtime.driverGetVersion(), "runtime": cupy.cuda.runtime.runtimeGetVersion(),
                "cupy_nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion()))}
    return env


def run_record(loaded, document: dict, *, mode: str, seed: int, wall_s: float, gpu: bool, rows: int) -> dict:
    """One run as a receipt keeps it: how it ran (whole, stale, a shard), where, at which commit, how long, and
    how many of the contract's rows it wrote."""
    run = {"mode": mode, "created": now(), "seed": seed, "wall_s": round(wall_s, 2), "device": "gpu" if gpu else "cpu",
           "git": git_state(Path(loaded.path).resolve().parent),
           "environment": environment(gpu, document.get("toolchain")), "toolchain": document.get("toolchain"),
           "rows": rows, "of": len(loaded.entries) + len(loaded.controls),
           "references": document.get("references"), "inputs": document.get("inputs"),
           "task_seconds": document.get("stages")}
    return {"id": run_id(run), **run}


def run_receipt(loaded, document: dict, previous: Receipt | None, *, mode: str, seed: int, wall_s: float,
                gpu: bool, keep_rows: bool, notes: list[str] = (), covers: dict | None = None) -> Receipt:
    """The receipt after a run: its rows (with `keep_rows`, over the previous receipt's other rows, `run
    --stale`), the runs that own them, the SUMMARY of them all, and the mutation scores, coverage and bench rows
    carried."""
    outcomes = document.get("entries", []) + document.get("controls", [])
    run = run_record(loaded, document, mode=mode, seed=seed, wall_s=wall_s, gpu=gpu, rows=len(outcomes))
    earlier = previous.rows() if previous is not None else {}
    fresh = {}
    for outcome in outcomes:
        row = make_row(loaded, outcome, run)
        key = (row["task"]["kind"], row["task"]["name"])
        fresh[key] = with_cold_measures(row, earlier.get(key))
    before = previous if keep_rows and previous is not None and previous.has_rows else Receipt()
    runs = (previous.runs if previous is not None else []) + [run]  # put_rows keeps those that own rows or time
    receipt = Receipt().put_rows(loaded, merged_rows(loaded, before.rows(), fresh), runs,
                                 notes=notes, covers=covers, created=before.created)
    if previous is not None:
        carry(loaded, previous, receipt)
    return receipt


def carry(loaded, previous: Receipt, receipt: Receipt) -> None:
    """Put the previous receipt's mutation scores, coverage and bench rows whose kernel is unchanged into
    `receipt`."""
    receipt.put_mutation(carried_mutation(loaded, previous))
    receipt.put_coverage(carried_coverage(loaded, previous))
    if bench := carried_bench(loaded, previous):
        receipt.put_bench(bench, previous.bench_ceiling)
