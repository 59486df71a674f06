"""The matmul family: realistic token rows, their batching variants across M, split-K stress rows whose pieces
cancel across magnitudes, and integer rows whose every partial sum is exact."""

from __future__ import annotations

import numpy as np

from kcontract.families.matmul.reference import expected
from kcontract.families.matmul.spec import Case, MatmulSpec
from kcontract.family.base import Family
from kcontract.family.batching import batch_variants
from kcontract.gatetable import Kind, Suite
from kcontract.numerics import from_bits, round_to, to_bits
from kcontract.problem import Checked, InvarianceSet, KernelLaunch, LaunchShape, OutputSpec, Problem, Reference
from kcontract.seeding import stream

ABI = ("a", "b", "out", "m", "n", "k")  # a bf16 [m, k], b bf16 [n, k], out [m, n] in the entry's format
TILE_M, TILE_N, THREADS = 64, 128, 256  # the launch grid's tile: one block per 64 x 128 outputs
FILLERS = 5  # other rows mixed into the variants suite's batches
VARIANT_ROWS = 32  # rows of a case that gate 2 runs alone and in batches
STRESS_ROWS, EXACT_ROWS = 8, 8
TEMPLATE = """\
# the declared accumulation: fp32 sums in any order, or tensor-core k-steps (mma_bf16) chained over each of
# split_k contiguous pieces of K (fixed, never chosen from M), the pieces added in fp32; out: bf16 or fp32
arithmetic: {accumulate: fp32, split_k: 1, out: bf16}
# each case: M token rows times K, against N weight rows of K
cases:
  - {name: m64_k4096_n4096, m: 64, k: 4096, n: 4096}
"""


class Matmul(Family):
    """out = a b^T: token rows against weight rows, the reduction over K."""

    name = "matmul"
    Spec = MatmulSpec
    suites = frozenset(Suite)
    abi = ABI
    spec: MatmulSpec

    @classmethod
    def template(cls) -> str:
        return TEMPLATE

    def cases(self, suite: Suite) -> list[str]:
        prefix = {Suite.STRESS: "stress/", Suite.EXACT: "exact/"}.get(suite, "")
        return [prefix + c.name for c in self.spec.cases]

    def checks(self, suite: Suite, case: str) -> list[Checked]:
        inputs = self.memo((suite.value, case), lambda: self._draw(suite, case))
        return [Checked(case, self._problem(case, inputs), lambda: self._reference(inputs))]

    def invariance(self, suite: Suite, case: str) -> list[InvarianceSet]:
        drawn = self.memo((Suite.REALISTIC.value, case), lambda: self._draw(Suite.REALISTIC, case))
        inputs = {"a": drawn["a"][:VARIANT_ROWS], "b": drawn["b"]}
        fillers = self.memo(("fillers", case), lambda: self._draw(Suite.REALISTIC, case, FILLERS))

        def build(kind: str, label: str, members: list[int]) -> Problem:
            a = np.stack([inputs["a"][m] if m >= 0 else fillers["a"][-1 - m] for m in members])
            return self._problem(f"{case}/{label}", {"a": a, "b": inputs["b"]})

        rows = len(inputs["a"])
        return [InvarianceSet(case, self._problem(f"{case}/base", inputs), ("out",),
                              batch_variants(rows, FILLERS, build), axes=("row",))]

    def launch_shapes(self) -> list[LaunchShape]:
        return [LaunchShape("matmul", THREADS)]

    def hints(self, kind: Kind) -> tuple[str, ...]:
        extra = {Kind.RANGES: ("a K tail dropped", "a bf16 or fp16 accumulator", "split-K partials merged without "
                               "their full fp32 sum"),
                 Kind.INVARIANCE: ("split-K or the tile size chosen from M", "atomics in the split-K merge")}
        return extra.get(kind, ()) + super().hints(kind)

    def case_bytes(self, case: str) -> int:
        c = self._case(case)
        return (c.m * c.k + c.n * c.k) * 10 + c.m * c.n * 8 * 6

    def _case(self, name: str) -> Case:
        return next(c for c in self.spec.cases if c.name == name.rpartition("/")[2])

    def _draw(self, suite: Suite, case: str, count: int | None = None) -> dict[str, np.ndarray]:
        """bf16 bit patterns of a [rows, K] and b [N, K], drawn from the seed, the entry and the case."""
        c = self._case(case)
        rng = stream(self.seed, self.entry, case, suite.value, "fillers" if count else "rows")
        rows = count or {Suite.STRESS: STRESS_ROWS, Suite.EXACT: EXACT_ROWS}.get(suite, c.m)
        if suite is Suite.EXACT:  # small integers: every product and partial sum exact in fp32, not in bf16
            a = rng.integers(-16, 17, size=(rows, c.k)).astype(np.float64)
            b = rng.integers(-16, 17, size=(c.n, c.k)).astype(np.float64)
            a[:, -1], b[:, -1] = 16, 15  # the last term matters: a dropped K tail shows
        else:
            b = rng.standard_normal((c.n, c.k)) / np.sqrt(c.k)
            a = rng.standard_normal((rows, c.k)) * 10.0 ** rng.uniform(-1, 1, size=(rows, 1))
            if suite is Suite.STRESS:  # K's halves of opposite sign and 2^12 times the result: pieces cancel
                half = c.k // 2
                big = rng.uniform(2e3, 4e3, size=(rows, 1)) * rng.choice([-1, 1], size=(rows, 1))
                a[:, :half] += big
                a[:, half:2 * half] += big
                b[:, half:2 * half] = -b[:, :half]
        return {"a": bits(a), "b": bits(b)}

    def _problem(self, label: str, inputs: dict[str, np.ndarray]) -> Problem:
        m, k = inputs["a"].shape
        n = inputs["b"].shape[0]
        grid = (-(-n // TILE_N), -(-m // TILE_M), 1)
        return Problem(label, dict(inputs), {"out": OutputSpec((m, n), self.spec.arithmetic.out)},
                       {"m": np.int32(m), "n": np.int32(n), "k": np.int32(k)},
                       (KernelLaunch("matmul", grid, ABI),))

    def _reference(self, inputs: dict[str, np.ndarray]) -> Reference:
        a, b = from_bits(inputs["a"], "bf16"), from_bits(inputs["b"], "bf16")
        return Reference([expected(a, b, self.spec.arithmetic)])


def bits(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of float64 values, rounded to nearest even."""
    return to_bits(round_to(x, "bf16"), "bf16").astype(np.uint16)
