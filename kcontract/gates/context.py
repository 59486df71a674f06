"""What a gate gets: the entry and its family, the kernel under test, a launcher, the seed and progress."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Callable

from kcontract.builds.artifact import KernelBuild
from kcontract.contract.loaded import LoadedContract, LoadedEntry
from kcontract.contract.model import KernelRef
from kcontract.family.base import Family
from kcontract.family.cases import family_cases, selected_cases
from kcontract.gates.base import GateResult
from kcontract.gatetable import gate
from kcontract.launch.base import Launcher
from kcontract.refcache import ReferenceCache


@dataclass
class GateContext:
    """One entry (or a control standing in for it) under test."""

    loaded: LoadedContract
    entry: LoadedEntry
    family: Family
    kernel: KernelRef  # the entry's kernel, or the control's standing in for it
    seed: int
    contract_path: str  # as the user wrote it, for replay commands
    case: str | None = None  # only this case, when given
    control: str | None = None  # the control standing in for the entry's kernel, if any
    make_launcher: Callable[[], Launcher] | None = None
    progress: Callable[[int, str], None] = lambda gate, case: None  # called after each case of a gate
    references: ReferenceCache = field(default_factory=lambda: ReferenceCache(None, enabled=False))
    strict_records: bool = False  # gate 5's toolchain findings fail
    build: KernelBuild | None = None  # the kernel as built for the SMs the task needs (a CUDA kernel's)
    _launcher: Launcher | None = field(default=None, repr=False)

    @property
    def stops_at_red(self) -> bool:
        """A control (or a mutant) needs one red call to be red at its gate: its gate stops at the first."""
        return self.control is not None

    def stopped(self, result: GateResult, case: str) -> bool:
        """Whether the gate stops here (a control gone red), noting where in the result."""
        if not (self.stops_at_red and result.failures):
            return False
        result.facts["stopped_at_case"] = case
        return True

    @property
    def launcher(self) -> Launcher:
        """The kernel's launcher, made on first use (gate 5 needs none)."""
        if self._launcher is None:
            self._launcher = self.make_launcher()
        return self._launcher

    def loaded_attribute_mismatches(self) -> list[str]:
        """On a GPU: where the loaded functions' attributes differ from the record for the device's SM."""
        from kcontract.launch import gpu_present

        if self.make_launcher is None or self.kernel.compiled is None or not gpu_present():
            return []
        return self.launcher.attribute_mismatches(self.loaded, self.entry.name)

    def cases(self, number: int) -> list[str]:
        """The cases gate `number` runs: all of its suite's, or those `--case` picks (selected_cases)."""
        return selected_cases(self.family, number, self.case)

    def skipped(self, number: int) -> GateResult | None:
        """A passing, skipped result where the family's suite for this gate has no cases at all, else None."""
        if family_cases(self.family, number):
            return None
        row = gate(number)
        return GateResult(gate=number, passed=True, skipped=True,
                          message=f"skipped: family {self.family.name} has no {row.suite.value} cases for "
                                  f"gate {number} ({row.title})")

    def replay(self, gate: int, case: str | None = None) -> str:
        """The command that reruns just this gate (and case)."""
        target = ["--control", self.control] if self.control else ["--only", self.entry.name]
        words = ["kcontract", "run", "--contract", self.contract_path, *target, "--gate", str(gate),
                 "--seed", str(self.seed)] + (["--case", case] if case else [])
        return " ".join(shlex.quote(w) for w in words)

