"""What the attention decode and prompt families share: the score scale, the cases each gate runs, case lookup,
cache layouts and launch shapes."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention import drift
from kcontract.families.attention.window import Window
from kcontract.family.base import Family
from kcontract.family.torch_op import FromTorch, TorchOp
from kcontract.gatetable import Kind, Suite
from kcontract.problem import Checked, InvarianceSet, LaunchShape

STRESS_CASE = "merge-stress"
PARTIALS_THREADS, MERGE_THREADS = 256, 256  # the ABIs' block sizes (docs/families/attention.md 1 and 7)


class WindowAttention(Family):
    """A window-attention family: its cases realistic, their variants, a merge-stress call, and mirrors A, B and C
    per cache layout as exact inputs. Subclasses give exactness, variant_sets, merge_stress, mirror and
    _mirror_layouts."""

    suites = frozenset(Suite)
    bench_sizes = {"keys": (1024, 8192, 32768, 131072), "rows": (1, 4)}
    CAUSES = {Kind.RANGES: ("a merge without the exp(m_c - M) rescale", "bf16 accumulation of l or o",
                            "a key dropped or seen twice (the last key, a chunk's first, one before the window)",
                            "a query head reading the wrong key head", "truncation instead of rounding to bf16"),
              Kind.INVARIANCE: ("atomics or an order-dependent merge of the chunks",
                                "a chunk or tile size chosen from the batch or the cache length",
                                "tiles aligned to a call's start instead of absolute positions",
                                "uninitialised shared memory or a read past a row's keys",
                                "a race between warps or blocks")}

    @classmethod
    def from_torch_op(cls, op: TorchOp) -> FromTorch | None:
        """SDPA is attention's; why drift writes no entry for a model's padded call."""
        return drift.from_torch_op(op)

    @property
    def scale(self) -> float:
        """The fp32 score scale the kernel receives."""
        value = self.spec.scale if self.spec.scale is not None else 1.0 / np.sqrt(self.spec.shape.head_dim)
        return float(np.float32(value))

    def cases(self, suite: Suite) -> list[str]:
        if suite in (Suite.REALISTIC, Suite.VARIANTS):
            return [c.name for c in self.spec.cases]
        if suite is Suite.STRESS:
            return [STRESS_CASE]
        if suite is Suite.EXACT:
            return [f"mirror-{kind}/{layout}" for layout in self._mirror_layouts() for kind in "ABC"]
        return []

    def checks(self, suite: Suite, case: str) -> list[Checked]:
        if suite is Suite.REALISTIC:
            return self.exactness(case)
        if suite is Suite.STRESS and case == STRESS_CASE:
            return self.merge_stress()
        if suite is Suite.EXACT and case.startswith("mirror-"):
            kind, _, layout = case.removeprefix("mirror-").partition("/")
            return [self.mirror(kind, layout)]
        return []

    def invariance(self, suite: Suite, case: str) -> list[InvarianceSet]:
        return self.variant_sets(case) if suite is Suite.VARIANTS else []

    def hints(self, kind: Kind) -> tuple[str, ...]:
        return self.CAUSES.get(kind, ())

    def reference_device_bytes(self, case: str) -> int:
        """The replay's working budget (budget.WORKING_BYTES), the bounds it gathers in fp32 for a call's rows (the
        partials too where they are checked), and its copies of the longest keys as given (bf16 bits, k and v, for
        each sequence a call holds)."""
        from kcontract.families.attention.budget import replay_device_bytes

        shape, a = self.spec.shape, self.spec.arithmetic
        keys = self.longest_keys(case)
        copies = self.gate1_sequences(case) * keys * shape.kv_heads * shape.head_dim * 2 * 2
        return replay_device_bytes(self.gate1_rows(case), shape.q_heads, shape.head_dim, keys, a.chunk,
                                   a.partials == "checked", copies)

    def gate1_rows(self, case: str) -> int:
        """Rows a gate-1 call of the case replays at most."""
        raise NotImplementedError

    def gate1_sequences(self, case: str) -> int:
        """Key buffers a gate-1 call of the case holds at most (a sequence's rows share one)."""
        raise NotImplementedError

    def exports_needed(self) -> tuple[str, ...]:
        """A declared order whose counts are the kernel's own reads them from its exports."""
        from kcontract.families.attention.replay import KERNEL_FACTS, ORDERS

        order = ORDERS.get(self.spec.arithmetic.sum_order)
        return () if order is None else tuple(name for name, value in zip(KERNEL_FACTS, (order.key_groups, order.runs))
                                              if value is None)

    def launch_shapes(self) -> list[LaunchShape]:
        """Partials and merge blocks of 256 threads (a kernel declares other shapes under its `launch`)."""
        return [LaunchShape("partials", PARTIALS_THREADS), LaunchShape("merge", MERGE_THREADS)]

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

    def variant_sets(self, case: str) -> list[InvarianceSet]:
        raise NotImplementedError

    def merge_stress(self) -> list[Checked]:
        raise NotImplementedError

    def mirror(self, kind: str, layout: str) -> Checked:
        raise NotImplementedError

    def _mirror_layouts(self) -> dict:
        raise NotImplementedError
