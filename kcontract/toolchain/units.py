"""The CUDA kernels a contract names, grouped into compile units (one per source file and options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kcontract.contract.model import CudaKernel
from kcontract.contract.paths import resolve_source
from kcontract.toolchain.exports import name_expression


@dataclass(frozen=True)
class KernelUse:
    """One symbol of an entry's or a control's CUDA kernel."""

    owner: str  # "entry" or "control"
    name: str  # the entry's or control's name
    role: str  # the ABI role in the family (e.g. partials, merge)
    expression: str  # the NVRTC name expression, e.g. "reduce<128, 256>"
    label: str  # the source as the contract writes it
    source: Path  # the source, resolved
    options: tuple[str, ...]
    patch_label: str | None = None  # the patch applied to the source, as the contract writes it
    patch: Path | None = None  # the patch, resolved
    exports: tuple[str, ...] = ()  # name expressions of variables the kernel exports (toolchain/exports.py)


@dataclass(frozen=True)
class Unit:
    """One source (with its patch, if any) compiled with one option list; its cubin holds every instantiation
    anyone names."""

    label: str
    source: Path
    options: tuple[str, ...]
    expressions: tuple[str, ...]
    users: tuple[str, ...]  # entry and control names, for messages
    patch_label: str | None = None
    patch: Path | None = None
    # name expressions of exported variables (`&wd::kExportPvKeyGroups<128, 4>`): compiled with the expressions,
    # so NVRTC instantiates them and lowers their names; read back with toolchain/exports.py
    exports: tuple[str, ...] = ()

    @property
    def ident(self) -> tuple[str, tuple[str, ...], str | None]:
        """(label, options, patch): what makes two uses share a unit."""
        return self.label, self.options, self.patch_label

    @property
    def shown(self) -> str:
        """`kernels/x.cu`, or `kernels/x.cu with controls/y.patch`."""
        return self.label + (f" with {self.patch_label}" if self.patch_label else "")


def uses_of(owner: str, name: str, kernel: CudaKernel | None, base: Path) -> list[KernelUse]:
    """Every symbol of one CUDA kernel reference (none for a Python kernel)."""
    if kernel is None:
        return []
    source = resolve_source(base, kernel.source)
    patch = resolve_source(base, kernel.patch) if kernel.patch else None
    exports = tuple(name_expression(variable) for variable in kernel.exports.values())
    return [KernelUse(owner, name, role, expression, kernel.source, source, tuple(kernel.options), kernel.patch,
                      patch, exports) for role, expression in kernel.symbols.items()]


def contract_uses(loaded, *, entries: bool = True, controls: bool = True) -> list[KernelUse]:
    """Every CUDA kernel symbol of a LoadedContract's entries and controls."""
    base = Path(loaded.path).resolve().parent
    found: list[KernelUse] = []
    if entries:
        for entry in loaded.entries:
            found += uses_of("entry", entry.name, entry.kernel.cuda, base)
    if controls:
        for control in loaded.controls:
            found += uses_of("control", control.name, control.kernel.cuda, base)
    return found


def group_units(uses: list[KernelUse]) -> list[Unit]:
    """One unit per (source, options, patch), with the sorted union of its expressions (and of its exports)."""
    groups: dict[tuple, list[KernelUse]] = {}
    for use in uses:
        groups.setdefault((use.label, use.options, use.patch_label or ""), []).append(use)
    units = []
    for (label, options, _), members in sorted(groups.items()):
        units.append(Unit(label, members[0].source, options,
                          tuple(sorted({u.expression for u in members})),
                          tuple(dict.fromkeys(u.name for u in members)), members[0].patch_label, members[0].patch,
                          tuple(sorted({e for u in members for e in u.exports}))))
    return units
