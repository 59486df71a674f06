"""What a gate gets: the entry's family, a launcher, the seed and the replay command."""

from __future__ import annotations

from dataclasses import dataclass

from kcontract.families.base import Family
from kcontract.launch.base import Launcher


@dataclass
class GateContext:
    """One entry (or a control standing in for it) under test."""

    entry: str
    family: Family
    launcher: Launcher
    seed: int
    contract_path: str
    case: str | None = None  # only this case, when given
    control: str | None = None  # the control standing in for the entry's kernel, if any

    def cases(self) -> list[str]:
        """The cases to run."""
        names = self.family.case_names()
        return [self.case] if self.case is not None else names

    def replay(self, gate: int, case: str | None = None) -> str:
        """The command that reruns just this gate."""
        target = f"--control {self.control}" if self.control else f"--only {self.entry}"
        cmd = f"kcontract run --contract {self.contract_path} {target} --gate {gate} --seed {self.seed}"
        return cmd + (f" --case {case}" if case else "")
