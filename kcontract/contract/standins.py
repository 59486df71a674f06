"""Contracts of stand-ins: an entry copied beside patched kernels that stand in for it as controls (mutants,
coverage probes), so they run through the ordinary runner with the entry's cases, inputs and references."""

from __future__ import annotations

import os
from pathlib import Path

from kcontract.contract.paths import readable_folders, resolve_source
from kcontract.gatetable import launching


def standin_document(loaded, here: Path, sm: str) -> dict:
    """The top of a stand-ins' contract in folder `here`: the seed, the one SM, and the folders the contract it
    stands in for may read its kernel files from (its own among them), relative to `here`."""
    folders = [os.path.relpath(folder, here) for folder in readable_folders(loaded.path, loaded.model.include)]
    return {"version": 1, "seed": loaded.seed, "targets": [sm], "include": folders}


def standin_entry(loaded, entry, here: Path, cases: tuple[str, ...] = ()) -> dict:
    """The entry as a contract in folder `here` would hold it: its resolved compiled kernel (source by a relative
    path; a CUDA source's folder on the include path for local headers), its launching gates, on `cases` of it or
    all."""
    kind = entry.kernel.compiled_field
    compiled = entry.kernel.compiled.model_dump(mode="json", exclude_none=True, exclude={"instances"})
    source = resolve_source(Path(loaded.path).resolve().parent, compiled["source"]).resolve()
    compiled["source"] = os.path.relpath(source, here)
    if kind == "cuda":
        compiled["options"] = [*compiled.get("options", []), f"-I{os.path.relpath(source.parent, here)}"]
    spec = entry.family.spec.model_dump(mode="json", exclude_none=True)
    if cases:
        spec["cases"] = [c for c in spec["cases"] if c["name"] in cases]
    return {"name": entry.name, "family": entry.family.name, "kernel": {kind: compiled},
            "gates": [g for g in launching() if g in entry.gates], **spec}


def source_label(loaded, entry, here: Path) -> str:
    """The entry's kernel source as a path relative to `here`, as a patch written there names it."""
    return os.path.relpath(resolve_source(Path(loaded.path).resolve().parent, entry.kernel.compiled.source).resolve(),
                           here)
