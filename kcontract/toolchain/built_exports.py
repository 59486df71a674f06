"""The exports of a contract's kernels as built: each kernel compiled (or found in the compile cache) for the SMs
asked, then its exported constants read from the cubin (exports.py reads them)."""

from __future__ import annotations

from pathlib import Path

from kcontract.toolchain.build import build
from kcontract.toolchain.cache import CompileCache, cache_root
from kcontract.toolchain.exports import ExportError, kernel_exports
from kcontract.toolchain.locate import find_toolchain
from kcontract.toolchain.units import unit_of


def launch_exports(loaded, entry_kernel, kernel, sms: list[str], built=None) -> tuple[dict[str, dict[str, int]],
                                                                                     list[str]]:
    """The exports a kernel's launch reads, per SM built: a stand-in (a control, a mutant) launched as its entry is
    takes its entry's, so its launch is the production one; a kernel with a launch of its own, its own."""
    source = entry_kernel if entry_kernel is not None and (kernel.launch, kernel.exports) == (
        entry_kernel.launch, entry_kernel.exports) else kernel
    if not source.exports:
        return {}, []
    unit = unit_of(loaded, source)
    if built is None or any(built.module(unit, sm) is None for sm in sms if sm not in built.skipped):
        built = build([unit], sms, CompileCache(cache_root(loaded.path)), Path(loaded.path).resolve().parent, jobs=1)
    found, errors = {}, []
    for sm in sms:
        module = built.module(unit, sm)
        if module is None:
            continue
        try:
            found[sm] = kernel_exports(module, source)
        except ExportError as error:
            errors.append(f"{source.source} on {sm}: {error.message}")
    return found, errors


def exports_sms(loaded, tool=None) -> list[str]:
    """The SM whose module family_exports reads: the first target this toolchain builds (none: an empty list)."""
    tool = tool or find_toolchain()
    return [sm for sm in loaded.targets if tool.builds(sm)][:1]


def family_exports(loaded, kernel, family) -> dict[str, int]:
    """The exports a family reads of an entry's CUDA kernel (those its arithmetic needs and those it launches by),
    from its module for the first target SM this toolchain builds (compiled once, then cached): facts of its
    arithmetic and tiling, the same on every SM."""
    names = family.exports_needed() + family.launch_exports()
    if kernel is None or not names:
        return {}
    unit, tool = unit_of(loaded, kernel), find_toolchain()
    sm = next(iter(exports_sms(loaded, tool)), None)
    built = build([unit], [sm] if sm else [], CompileCache(cache_root(loaded.path)), Path(loaded.path).resolve().parent,
                  jobs=1, toolchain=tool)
    module = built.module(unit, sm) if sm else None
    if module is None:
        raise ExportError(f"{kernel.source} does not compile for {sm or 'any target SM'}, so its exports cannot be read")
    values = kernel_exports(module, kernel)
    return {name: values[name] for name in names}
