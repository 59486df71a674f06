"""The `rowsum` family: out[r] = sum of x[r, :], bf16 in, accumulated in fp32 in any order, out in fp32 or bf16.

Each suite draws its own rows; the float64 reference is the exact sum, and the range allows any fp32 order:
|fl(sum) - sum| <= gamma_{n-1} sum |x| (Higham), zero where every partial sum is exact.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from kcontract.contract.model import Strict
from kcontract.family.base import Family
from kcontract.family.batching import batch_variants
from kcontract.gatetable import Kind, Suite
from kcontract.numerics import U32, expected_bounds, from_bits, gamma, round_to, sums_exact, to_bits
from kcontract.problem import (Checked, Expected, InvarianceSet, KernelLaunch, LaunchShape, OutputSpec, Problem,
                               Reference)
from kcontract.seeding import stream

ABI = ("x", "out", "length")  # x: bf16 bits [rows, length]; out: [rows] in the entry's format; length: int32
FILLERS = 5  # other rows mixed into the variants suite's batches
STRESS_ROWS, EXACT_ROWS = 6, 6
STRESS_LENGTH = 1024  # the shortest row the stress suite draws
TEMPLATE = """\
# the output's format: fp32 or bf16
out: fp32
# each case: `rows` rows of `length` bf16 values; gate 3 runs the cases of at least 1024 values
cases:
  - {name: short, length: 300, rows: 8}
  - {name: long, length: 4096, rows: 4}
"""


class Case(Strict):
    """Rows of one length."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    length: int = Field(gt=1, le=1 << 16)
    rows: int = Field(gt=0, le=64)


class RowSumSpec(Strict):
    """The entry's fields beside the generic ones: the output format and the cases."""

    out: Literal["fp32", "bf16"] = "fp32"
    cases: list[Case] = Field(min_length=1)


class RowSum(Family):
    """Row sums: realistic rows, their batching variants, cancelling rows, and rows of small integers."""

    name = "rowsum"
    Spec = RowSumSpec
    suites = frozenset(Suite)
    abi = ABI
    spec: RowSumSpec

    @classmethod
    def template(cls) -> str:
        return TEMPLATE

    def cases(self, suite: Suite) -> list[str]:
        if suite in (Suite.REALISTIC, Suite.VARIANTS):
            return [c.name for c in self.spec.cases]
        if suite is Suite.STRESS:  # cancelling halves need rows long enough to hold several blocks
            return [f"stress/{c.name}" for c in self.spec.cases if c.length >= STRESS_LENGTH]
        return [f"exact/{c.name}" for c in self.spec.cases]

    def checks(self, suite: Suite, case: str) -> list[Checked]:
        rows = self.memo((suite.value, case), lambda: self._draw(suite, case))
        return [Checked(case, self._problem(case, rows), lambda: self._reference(rows))]

    def invariance(self, suite: Suite, case: str) -> list[InvarianceSet]:
        rows = self.memo((Suite.REALISTIC.value, case), lambda: self._draw(Suite.REALISTIC, case))
        fillers = self.memo(("fillers", case), lambda: self._draw(Suite.REALISTIC, case, "fillers", FILLERS))

        def build(kind: str, label: str, members: list[int]) -> Problem:
            return self._problem(f"{case}/{label}", np.stack([rows[m] if m >= 0 else fillers[-1 - m]
                                                               for m in members]))

        variants = batch_variants(len(rows), len(fillers), build)
        return [InvarianceSet(case, self._problem(f"{case}/base", rows), ("out",), variants, axes=("row",))]

    def launch_shapes(self) -> list[LaunchShape]:
        return [LaunchShape("rowsum", 256)]

    def hints(self, kind: Kind) -> tuple[str, ...]:
        extra = {Kind.RANGES: ("a bf16 accumulator", "an element dropped at a block's edge"),
                 Kind.INVARIANCE: ("a block size chosen from the number of rows",)}
        return extra.get(kind, ()) + super().hints(kind)

    def case_bytes(self, case: str) -> int:
        c = self._case(case)
        return c.rows * c.length * 2 * 8

    def _case(self, name: str) -> Case:
        return next(c for c in self.spec.cases if c.name == name.rpartition("/")[2])

    def _draw(self, suite: Suite, case: str, what: str = "rows", count: int | None = None) -> np.ndarray:
        """bf16 bit patterns [rows, length], drawn from the seed, the entry and the case."""
        c = self._case(case)
        rng = stream(self.seed, self.entry, case, what)
        if suite is Suite.STRESS:  # halves of opposite sign, thousands of times the row's sum
            half = c.length // 2
            big = rng.uniform(1e3, 4e3, size=(STRESS_ROWS, 1)) * rng.choice([-1, 1], size=(STRESS_ROWS, 1))
            x = rng.standard_normal((STRESS_ROWS, c.length))
            x[:, :half] += big
            x[:, half:2 * half] -= big
        elif suite is Suite.EXACT:  # small integers on a positive bias: exact in fp32, not in a bf16 accumulator
            x = rng.integers(-8, 9, size=(EXACT_ROWS, c.length)) + rng.integers(0, 9, size=(EXACT_ROWS, 1))
            x[:, 0], x[:, -1] = 64, -32  # the first and last element matter: a dropped one shows
        else:  # magnitudes over six decades, so partial sums round and the order shows
            shape = (count or c.rows, c.length)
            x = rng.standard_normal(shape) + rng.uniform(0.5, 2.0, size=(shape[0], 1))
            x *= 10.0 ** rng.uniform(-3, 3, shape)
        return to_bits(round_to(x, "bf16"), "bf16").astype(np.uint16)

    def _problem(self, label: str, rows: np.ndarray) -> Problem:
        n, length = rows.shape
        return Problem(label, {"x": rows}, {"out": OutputSpec((n,), self.spec.out)}, {"length": np.int32(length)},
                       (KernelLaunch("rowsum", (n, 1, 1), ABI),))

    def _reference(self, rows: np.ndarray) -> Reference:
        """The exact sum of each row and the range any fp32 order stays inside, rounded to the output format."""
        x = from_bits(rows, "bf16")
        center = np.array([math.fsum(r) for r in x])  # correctly rounded: within 2^-53 of the exact sum
        abs_sum = np.abs(x).sum(axis=1)
        radius = np.where(sums_exact(x, axis=1), 0.0, gamma(x.shape[1] - 1, U32) * abs_sum + 2.0**-52 * abs_sum)
        fp32_lo, fp32_hi = expected_bounds(center, radius, "fp32")
        lo, hi = round_to(fp32_lo, self.spec.out), round_to(fp32_hi, self.spec.out)
        return Reference([Expected("out", self.spec.out, lo, hi, center, ("row",))])

