"""A contract after validation: entries with their family objects and kernels resolved."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcontract.contract.model import Contract, KernelRef, KnownFinding
from kcontract.family.base import Family


@dataclass
class LoadedEntry:
    """One validated entry: its family instance (spec parsed), resolved kernel and gate list."""

    name: str
    family_name: str
    family: Family
    kernel: KernelRef  # named kernels looked up, symbol placeholders filled in
    gates: list[int]
    timeout: float
    line: int | None = None  # where the entry starts in the contract file
    index: int = 0  # position in the file's `entries`
    coverage: object = None  # its CoverageFloor, where it declares one
    mutation: object = None  # its MutationArguments, where it argues survivors equivalent

    def fresh_family(self, seed: int) -> Family:
        """A new instance of the entry's family at `seed` (a task's own, with no drawn state), exports kept."""
        family = type(self.family)(self.name, self.family.spec, seed)
        family.exports = dict(self.family.exports)
        return family

    def launched(self, symbols: dict[str, str]) -> list[str]:
        """The expressions of `symbols` the family launches for this entry (a symbol its schedule never launches is
        no instantiation of its own), or all of them where the family names no roles."""
        roles = [getattr(shape, "role", None) for shape in self.family.launch_shapes() or []]
        chosen = [symbols[role] for role in dict.fromkeys(roles) if role in symbols]
        return chosen or list(symbols.values())

    @property
    def kernel_label(self) -> str:
        """`module:function` or `source.cu` for tables."""
        return self.kernel.label


@dataclass
class LoadedControl:
    """One validated control: the entry it stands in for, its resolved kernel and planted gate."""

    name: str
    entry: str
    kernel: KernelRef
    gate: int
    fault: str
    timeout: float | None
    line: int | None = None
    index: int = 0
    sanitize: str | None = None  # a compute-sanitizer tool that must report errors on it (`run --sanitize`)
    trials: int = 1  # times its gate may run until it goes red (a race need not show on every launch)


@dataclass
class LoadedContract:
    """The whole validated contract."""

    path: str
    model: Contract
    entries: list[LoadedEntry]
    controls: list[LoadedControl] = field(default_factory=list)
    known_findings: list[KnownFinding] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # field path ("entries[0].cases[1]") -> line
    raw: dict = field(default_factory=dict)  # the file's YAML as parsed (receipt rows hash their own nodes of it)

    @property
    def seed(self) -> int:
        """The contract's seed."""
        return self.model.seed

    @property
    def targets(self) -> list[str]:
        """Target SMs for compiles and records."""
        return list(self.model.targets)

    def entry(self, name: str) -> LoadedEntry:
        """The entry called `name` (KeyError if absent)."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def control(self, name: str) -> LoadedControl:
        """The control called `name` (KeyError if absent)."""
        for control in self.controls:
            if control.name == name:
                return control
        raise KeyError(name)
