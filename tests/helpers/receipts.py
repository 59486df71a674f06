"""Receipts as a GPU run would write them, made without a GPU: passing outcomes for every entry and control of a
contract, rows at the commit of a small git project."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kcontract.contract.loader import load_contract
from kcontract.receipts.write import run_receipt


def outcome(kind: str, name: str, entry: str, gates: list[int], red: set[int] = frozenset()) -> dict:
    """An outcome as the JSON report writes it: every gate run, those in `red` failing."""
    task = {"kind": kind, "name": name, "entry": entry, "contract_path": "contract.yaml", "gates": gates, "seed": 0}
    results = {str(g): {"gate": g, "passed": g not in red, "checked": 10, "decided": 10, "bit_equal": 10, "within": 0,
                        "failures": 3 if g in red else 0} for g in gates}
    return {"task": task, "status": "ran", "gates": results, "seconds": 1.0,
            "kernel": {"sm": "sm_90a", "toolchain": "nvrtc-test"}}


def passing_document(loaded) -> dict:
    """Every entry passing its gates, every control red at its planted gate."""
    entries = [outcome("entry", e.name, e.name, e.gates) for e in loaded.entries]
    controls = [outcome("control", c.name, c.entry, [c.gate], {c.gate}) for c in loaded.controls]
    return {"entries": entries, "controls": controls, "toolchain": None}


def gpu_receipt(contract: Path, document: dict | None = None) -> dict:
    """A receipt of the contract's rows as a GPU run at the project's commit would write it."""
    loaded = load_contract(str(contract), import_kernels=False)
    receipt = run_receipt(loaded, document or passing_document(loaded), None, mode="whole", seed=loaded.seed,
                          wall_s=1.0, gpu=False, keep_rows=False).to_dict()
    receipt["device"] = "gpu"
    for run in receipt["runs"]:
        run["device"] = "gpu"
    return receipt


def write_receipt(contract: Path, receipt: dict, name: str = "contract-h200.json") -> Path:
    """The receipt under receipts/ beside the contract."""
    folder = contract.parent / "receipts"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(receipt))
    return path


def git(folder: Path, *args: str) -> str:
    """A git command in `folder`, as a test author without a git identity runs it."""
    done = subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-C", str(folder), *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit_all(folder: Path, message: str = "a commit") -> str:
    """Commit everything in a (new or existing) git project; its commit id."""
    if not (folder / ".git").exists():
        git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD")
