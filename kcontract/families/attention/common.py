"""What the attention decode and prompt families share: the score scale, the cases each gate runs, case lookup,
cache layouts and launch shapes."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.window import Window
from kcontract.families.base import Family
from kcontract.problem import Checked

STRESS_CASE = "merge-stress"
PARTIALS_THREADS, MERGE_THREADS = 256, 256  # the ABIs' block sizes (docs/kernel-contract.md 1 and 7)


class WindowAttention(Family):
    """A window-attention family: gate 1 on its cases, gate 2 on their variants, gate 3 on a merge-stress call,
    gate 4 on mirrors A, B and C per cache layout. Subclasses give exactness, merge_stress, mirror and
    _mirror_layouts."""

    gates = (1, 2, 3, 4)

    @property
    def scale(self) -> float:
        """The fp32 score scale the kernel receives."""
        value = self.spec.scale if self.spec.scale is not None else 1.0 / np.sqrt(self.spec.shape.head_dim)
        return float(np.float32(value))

    def cases(self, gate: int) -> list[str]:
        if gate in (1, 2):
            return [c.name for c in self.spec.cases]
        if gate == 3:
            return [STRESS_CASE]
        if gate == 4:
            return [f"mirror-{kind}/{layout}" for layout in self._mirror_layouts() for kind in "ABC"]
        return []

    def checks(self, gate: int, case: str) -> list[Checked]:
        if gate == 1:
            return self.exactness(case)
        if gate == 3 and case == STRESS_CASE:
            return self.merge_stress()
        if gate == 4 and case.startswith("mirror-"):
            kind, _, layout = case.removeprefix("mirror-").partition("/")
            return [self.mirror(kind, layout)]
        return []

    def launch_shapes(self) -> list[dict]:
        """Partials and merge blocks of 256 threads (a kernel declares other shapes under its `launch`)."""
        return [{"symbol": "partials", "threads": PARTIALS_THREADS, "dynamic_smem": 0},
                {"symbol": "merge", "threads": MERGE_THREADS, "dynamic_smem": 0}]

    def _case(self, name: str):
        for case in self.spec.cases:
            if case.name == name:
                return case
        raise KeyError(f"entry {self.entry} has no case {name!r}; cases: {', '.join(self.cases(1))}")

    @staticmethod
    def window_of(case) -> Window:
        """The case's cache layout."""
        return Window(win=case.cache.win, ring=case.cache.rows)

    def exactness(self, case: str) -> list[Checked]:
        raise NotImplementedError

    def merge_stress(self) -> list[Checked]:
        raise NotImplementedError

    def mirror(self, kind: str, layout: str) -> Checked:
        raise NotImplementedError

    def _mirror_layouts(self) -> dict:
        raise NotImplementedError
