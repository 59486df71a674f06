"""A project whose contract registers the repository's Triton RMSNorm (and, on request, a copy of it under another
name), with the controls a test asks for as patches of its source."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from kcontract.contract.patches import make

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "kernels/rms_norm_triton.py"
SYMBOL = "rms_norm_rows(BLOCK=1024, num_warps=4, num_stages=1)"
TARGETS = ["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120", "sm_121"]


CASES = ({"name": "m16_h4096", "hidden": 4096, "rows": 16}, {"name": "m4_h9001", "hidden": 9001, "rows": 4})


def entry(name: str, source: str = SOURCE, symbol: str = SYMBOL, cases: tuple[dict, ...] = CASES) -> dict:
    """An rmsnorm entry of a Triton kernel with small cases."""
    return {"name": name, "family": "rmsnorm", "kernel": {"triton": {"source": source, "symbols": {"rmsnorm": symbol}}},
            "eps": 1.0e-6, "cases": list(cases)}


def project(folder: Path, *, controls: dict[str, tuple[int, str, str]] | None = None,
            copies: tuple[str, ...] = (), symbol: str = SYMBOL, cases: tuple[dict, ...] = CASES) -> Path:
    """The contract's path: entry `triton_rms` of `cases` (and `copy_<name>` of each copy's file), and a control per
    `controls` item, name -> (gate, text replaced, its replacement) in the source."""
    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    (folder / "controls").mkdir(exist_ok=True)
    shutil.copy(ROOT / SOURCE, folder / SOURCE)
    text = (ROOT / SOURCE).read_text()
    entries = [entry("triton_rms", symbol=symbol, cases=cases)]
    for name in copies:
        shutil.copy(ROOT / SOURCE, folder / "kernels" / f"{name}.py")
        entries.append(entry(f"copy_{name}", f"kernels/{name}.py"))
    listed = []
    for name, (gate, old, new) in (controls or {}).items():
        assert old in text, old
        (folder / "controls" / f"{name}.patch").write_text(make(text, text.replace(old, new, 1), SOURCE))
        listed.append({"name": name, "entry": "triton_rms", "gate": gate, "fault": name,
                       "patch": f"controls/{name}.patch"})
    document = {"version": 1, "seed": 1, "targets": TARGETS, "entries": entries, "controls": listed}
    contract = folder / "contract.yaml"
    contract.write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    return contract


def checked_afresh(contract: Path):
    """`kcontract check` of the contract in process, with Triton looked for anew before and after (the lookup is
    cached per process, and a test may have hidden or broken it)."""
    from click.testing import CliRunner

    from kcontract.builds import triton as builder
    from kcontract.cli import cli

    builder.find_triton.cache_clear()
    try:
        return CliRunner().invoke(cli, ["check", "--contract", str(contract)])
    finally:
        builder.find_triton.cache_clear()


def committed(folder: Path) -> None:
    """The folder as the first commit of a git repository of its own."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)

    git("init", "-q", ".")
    git("add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base")
