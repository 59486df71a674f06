"""A project whose controls only add a comment to one of the repository's kernel files, with entries that name the
file's instantiations as the repository's contract does: each control's cubin holds one entry's instantiations, the
entries' cubin all of them, so the compiler numbers their internal functions differently."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

from kcontract.contract.loader import load_contract
from kcontract.contract.patches import make

ROOT = Path(__file__).resolve().parents[2]
KERNEL_FILES = sorted(f"kernels/{path.name}" for path in (ROOT / "kernels").glob("*.cu"))
COMMENT = "// a comment that plants nothing"
SETS = 2  # entries per project: the first distinct symbol sets the repository's contract gives the file


def symbol_sets(source: str) -> list[dict[str, str]]:
    """The distinct symbol sets of the repository contract's entries of `source`, in entry order."""
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    found: list[dict[str, str]] = []
    for entry in loaded.entries:
        cuda = entry.kernel.cuda
        if cuda is not None and cuda.source == source and dict(cuda.symbols) not in found:
            found.append(dict(cuda.symbols))
    return found


def commented(text: str) -> str:
    """The source with a comment line above its first kernel, which moves every kernel's code."""
    lines = text.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "__global__" in line)
    while first and lines[first - 1].startswith("template"):
        first -= 1
    return "".join(lines[:first] + [COMMENT + "\n"] + lines[first:])


def comment_project(folder: Path, source: str, targets: list[str]) -> Path:
    """A contract in `folder` with an entry per symbol set of `source` (records-only family) and a control on
    each whose patch only adds a comment; returns the contract's path."""
    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    (folder / "controls").mkdir(exist_ok=True)
    for path in [ROOT / source, *(ROOT / "kernels").glob("*.cuh")]:
        shutil.copy(path, folder / "kernels")
    shutil.copytree(ROOT / "tests" / "families", folder / "tests" / "families", dirs_exist_ok=True)
    shutil.copy(ROOT / "tests" / "__init__.py", folder / "tests")
    text = (ROOT / source).read_text()
    sets = symbol_sets(source)[:SETS]
    assert len(sets) > 1, f"{source}: the repository's contract names one instantiation set"
    for i in range(len(sets)):  # a patch file each: controls sharing one would share a cubin of all their symbols
        (folder / "controls" / f"comment_e{i}.patch").write_text(make(text, commented(text), source))
    document = {
        "version": 1, "seed": 1, "targets": targets,
        "entries": [{"name": f"e{i}", "family": "tests.families.tiny:TinyFamily",
                     "kernel": {"cuda": {"source": source, "symbols": symbols}},
                     "launch": {role: {"threads": 256} for role in symbols}} for i, symbols in enumerate(sets)],
        "controls": [{"name": f"comment_e{i}", "entry": f"e{i}", "gate": 5, "fault": "a comment",
                      "patch": f"controls/comment_e{i}.patch"} for i in range(len(sets))],
    }
    contract = folder / "contract.yaml"
    contract.write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    return contract


def refusal(source: str, sms: str, index: int = 0) -> str:
    """A pattern of the one error line `check` gives control `index` when its patch changes no machine code."""
    return (rf"ERROR.*contract\.yaml:\d+: controls\[{index}\]\.patch: a patch that changes machine code; "
            rf"controls/\w+\.patch leaves every function of {re.escape(source)} with its machine code "
            rf"\(normalised SASS\) on {sms}: plant the fault where it compiles to something")
