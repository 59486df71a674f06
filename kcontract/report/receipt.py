"""A run's receipt: environment, the sources it ran with their sha256, per-gate counts and the SUMMARY line."""

from __future__ import annotations

import datetime
import importlib.util
import platform
from pathlib import Path

import numpy as np

from kcontract import __version__
from kcontract.receipts import source_hashes


def environment() -> dict:
    """Where the run happened: host, Python, numpy, CuPy, the GPU and its driver when present."""
    env = {"kcontract": __version__, "python": platform.python_version(), "numpy": np.__version__,
           "machine": platform.machine()}
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        env |= {"cupy": cupy.__version__, "gpu": props["name"].decode(),
                "sm": f"sm_{props['major']}{props['minor']}",
                "driver": cupy.cuda.runtime.driverGetVersion(), "runtime": cupy.cuda.runtime.runtimeGetVersion()}
    except Exception:  # no CuPy or no GPU: the receipt says so
        env["gpu"] = "none"
    return env


def kernel_files(loaded, names: set[str]) -> list[str]:
    """Source files of the named entries' and controls' kernels, relative to the contract's folder."""
    base = Path(loaded.path).resolve().parent
    files: list[str] = []
    kernels = [e.kernel for e in loaded.entries if e.name in names]
    kernels += [c.kernel for c in loaded.controls if c.name in names]
    for kernel in kernels:
        if kernel.cuda is not None:
            files.append(kernel.cuda.source)
        else:
            spec = importlib.util.find_spec(kernel.python.partition(":")[0])
            if spec is not None and spec.origin:
                files.append(_relative(Path(spec.origin), base))
    return files


def _relative(path: Path, base: Path) -> str:
    """A path relative to base where it lies below it, else absolute."""
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)


def build_receipt(loaded, document: dict, names: set[str], seed: int) -> dict:
    """The receipt: the run document plus environment and source hashes."""
    base = Path(loaded.path).resolve().parent
    files = [Path(loaded.path).name] + kernel_files(loaded, names)
    return {
        "kind": "kcontract-run",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "contract": Path(loaded.path).name,
        "seed": seed,
        "environment": environment(),
        "sources": source_hashes([f for f in files if not Path(f).is_absolute()], base),
        **document,
    }


def receipt_markdown(receipt: dict) -> str:
    """The receipt as the markdown a pull request wants."""
    env = receipt.get("environment", {})
    lines = [f"**kcontract receipt** ({receipt.get('created', '?')}, contract `{receipt.get('contract')}`, "
             f"seed {receipt.get('seed')})", "",
             "Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), "",
             "| entry | gate | verdict | checked | decided | bit-equal | within | failures | s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for entry in receipt.get("entries", []):
        name = entry["task"]["name"]
        if entry["status"] != "ran":
            lines.append(f"| {name} | all | {entry['status']} | | | | | | |")
        for gate, r in sorted(entry.get("gates", {}).items()):
            verdict = "pass" if r["passed"] else "FAIL"
            lines.append(f"| {name} | {gate} | {verdict} | {r['checked']} | {r['decided']} | {r['bit_equal']} | "
                         f"{r['within']} | {r['failures']} | {r['seconds']:.1f} |")
    controls = receipt.get("controls", [])
    if controls:
        lines += ["", "| control | red at |", "|---|---|"]
        for c in controls:
            red = [g for g, r in sorted(c.get("gates", {}).items()) if not r["passed"]]
            lines.append(f"| {c['task']['name']} | {' '.join(red) or c['status']} |")
    lines += ["", "```", receipt.get("summary", ""), "```"]
    return "\n".join(lines)
