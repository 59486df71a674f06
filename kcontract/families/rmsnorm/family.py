"""The rmsnorm family: realistic rows with edge rows drawn on purpose, their batching variants, integer rows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kcontract.families.rmsnorm import drift
from kcontract.families.rmsnorm.orders import PLACEMENTS, as_bf16_bits, probe_rows, separated
from kcontract.families.rmsnorm.reference import expected, residual_expected, residual_sum
from kcontract.families.rmsnorm.spec import Case, RMSNormSpec
from kcontract.family.base import Family
from kcontract.family.torch_op import FromTorch, TorchOp
from kcontract.family.batching import batch_variants
from kcontract.gatetable import Kind, Suite
from kcontract.numerics import from_bits, round_to, to_bits
from kcontract.problem import (Checked, InvarianceSet, KernelLaunch, LaunchShape, OutputSpec, Problem, Reference)
from kcontract.seeding import stream

ABI = {"plain": ("x", "w", "out", "hidden", "eps"),
       "residual": ("x", "residual", "w", "out", "h_out", "hidden", "eps")}
THREADS = 256  # threads per row's block
FILLERS = 5  # other rows mixed into the variants suite's batches
EXACT_ROWS = 6
VARIANT_ROWS = 64  # realistic rows of a case that gate 2 runs alone and in batches (with its edge rows)
EDGE_ROWS = ("zero", "one_huge", "eps_dominated", "tiny", "large")
TEMPLATE = """\
# plain: y = x w / sqrt(mean(x^2) + eps); residual: h = x + r in fp32, h_out = bf16(h), y from the fp32 h
form: plain
eps: 1.0e-6
# the declared arithmetic the range allows for: the mean as a division (div) or a product with 1 / hidden (rcp),
# rsqrtf or 1 / sqrtf; the sum of squares in fp32 in any order
arithmetic: {mean: div, rsqrt: rsqrtf}
# each case: `rows` rows of `hidden` values (and five edge rows: zero, one huge, eps-dominated, tiny, large)
cases:
  - {name: h4096, hidden: 4096, rows: 16}
"""


class RMSNorm(Family):
    """RMS normalisation of token rows, plain or fused with a residual add."""

    name = "rmsnorm"
    Spec = RMSNormSpec
    suites = frozenset({Suite.REALISTIC, Suite.VARIANTS, Suite.EXACT})
    abi = ABI["plain"]
    bench_sizes = {"rows": (1, 256, 4096, 16384, 65536)}
    spec: RMSNormSpec

    @classmethod
    def from_torch_op(cls, op: TorchOp) -> FromTorch | None:
        """A model's RMSNorm is this family's; why drift writes no entry for it."""
        return drift.from_torch_op(op)

    @classmethod
    def template(cls) -> str:
        return TEMPLATE

    def kernel_abi(self) -> tuple[str, ...]:
        return ABI[self.spec.form]

    def cases(self, suite: Suite) -> list[str]:
        names = [c.name for c in self.spec.cases]
        return [f"exact/{n}" for n in names] if suite is Suite.EXACT else names

    def checks(self, suite: Suite, case: str) -> list[Checked]:
        inputs = self.memo((suite.value, case), lambda: self._draw(suite, case))
        return [Checked(case, self._problem(case, inputs), lambda: self._reference(inputs),
                        notes={"rows": self._row_tags(suite, case)})]

    def invariance(self, suite: Suite, case: str) -> list[InvarianceSet]:
        """The case's rows (edge rows too) in every batch, and the same batches of order probes: combs of rows on
        which the plausible orders of the sum of squares (lanes, vectors, warps, blocks) round apart."""
        drawn = self.memo((Suite.REALISTIC.value, case), lambda: self._draw(Suite.REALISTIC, case))
        rows = self._case(case).rows
        keep = list(range(min(rows, VARIANT_ROWS))) + list(range(rows, rows + len(EDGE_ROWS)))
        inputs = {name: value if name == "w" else value[keep] for name, value in drawn.items()}
        w = from_bits(inputs["w"], "bf16")
        probes = self.memo(("order", case), lambda: [
            (placement, probe_rows(w, self.spec.eps, placement, stream(self.seed, self.entry, case, "order",
                                                                       placement)))
            for placement in PLACEMENTS])
        told = self.memo(("orders", case), lambda: separated(np.concatenate([r for _, r in probes]), w,
                                                             self.spec.eps))
        sets = [self._variant_set(case, "", inputs)]
        for i, (placement, values) in enumerate(probes):
            sets.append(self._variant_set(case, f"order_probes/{placement}/", self._probe_inputs(values, inputs["w"]),
                                          told if i == 0 else None))
        return sets

    def _probe_inputs(self, values: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
        """Probe rows as the kernel's row inputs: x itself, or (residual) x = r = values / 2, so that h = values."""
        if self.spec.form == "residual":
            half = as_bf16_bits(values / 2)
            return {"x": half, "residual": half.copy(), "w": w}
        return {"x": as_bf16_bits(values), "w": w}

    def _variant_set(self, case: str, title: str, inputs: dict[str, np.ndarray], orders=None) -> InvarianceSet:
        """Base rows alone and in batches with filler rows, every variant labelled `title` first."""
        fillers = self.memo(("fillers", case), lambda: self._draw(Suite.REALISTIC, case, "fillers", FILLERS))

        def build(kind: str, label: str, members: list[int]) -> Problem:
            pick = {name: np.stack([inputs[name][m] if m >= 0 else fillers[name][-1 - m] for m in members])
                    for name in self._row_inputs()}
            return self._problem(f"{case}/{title}{label}", pick | {"w": inputs["w"]})

        outputs = ("out", "h_out") if self.spec.form == "residual" else ("out",)
        variants = batch_variants(len(inputs["x"]), FILLERS, build)
        return InvarianceSet(case, self._problem(f"{case}/{title}base", inputs), outputs,
                             (replace(v, label=title + v.label) for v in variants), axes=("row",), orders=orders)

    def bench_calls(self, sizes: dict[str, tuple[int, ...]]) -> list:
        from kcontract.families.rmsnorm.bench import rmsnorm_call

        widths = sorted({c.hidden for c in self.spec.cases if c.hidden % 8 == 0})[-1:]  # the widest whole-vector one
        return [rmsnorm_call(rows, hidden, self.spec.eps, self.spec.form == "residual", self.kernel_abi())
                for hidden in widths for rows in sizes["rows"]]

    def launch_shapes(self) -> list[LaunchShape]:
        return [LaunchShape("rmsnorm", THREADS)]

    def hints(self, kind: Kind) -> tuple[str, ...]:
        extra = {Kind.RANGES: ("eps added after the square root", "a bf16 or fp16 accumulator of the squares",
                               "a tail of the row (hidden not a multiple of the vector or the block) dropped"),
                 Kind.INVARIANCE: ("a reduction split or ordered by the number of rows or blocks",)}
        return extra.get(kind, ()) + super().hints(kind)

    def case_bytes(self, case: str) -> int:
        c = self._case(case)
        return (c.rows + len(EDGE_ROWS) + FILLERS) * c.hidden * 8 * 6

    def _case(self, name: str) -> Case:
        return next(c for c in self.spec.cases if c.name == name.rpartition("/")[2])

    def _row_inputs(self) -> tuple[str, ...]:
        return ("x", "residual") if self.spec.form == "residual" else ("x",)

    def _row_tags(self, suite: Suite, case: str) -> list[str]:
        rows = EXACT_ROWS if suite is Suite.EXACT else self._case(case).rows
        return ["integers"] * rows if suite is Suite.EXACT else ["realistic"] * rows + list(EDGE_ROWS)

    def _draw(self, suite: Suite, case: str, what: str = "rows", count: int | None = None) -> dict[str, np.ndarray]:
        """bf16 bit patterns: each row input [rows, hidden] and w [hidden], drawn from the seed, entry and case."""
        c = self._case(case)
        rng = stream(self.seed, self.entry, case, suite.value, what)
        w = 1.0 + 0.1 * rng.standard_normal(c.hidden)
        inputs = {}
        for name in self._row_inputs():
            if suite is Suite.EXACT:  # small integers: every square and partial sum exact in fp32, none in bf16
                x = rng.integers(-16, 17, size=(EXACT_ROWS, c.hidden)).astype(np.float64)
                x[:, 0], x[:, -1] = 15, -13  # the first and last element matter: a dropped one shows
                w = rng.integers(1, 9, size=c.hidden).astype(np.float64) / 4
            else:
                x = realistic_rows(rng, count or c.rows, c.hidden)
                if count is None:
                    x = np.concatenate([x, edge_rows(rng, c.hidden)])
            inputs[name] = to_bits(round_to(x, "bf16"), "bf16").astype(np.uint16)
        inputs["w"] = to_bits(round_to(w, "bf16"), "bf16").astype(np.uint16)
        return inputs

    def _problem(self, label: str, inputs: dict[str, np.ndarray]) -> Problem:
        rows, hidden = inputs["x"].shape
        outputs = {"out": OutputSpec((rows, hidden), "bf16")}
        if self.spec.form == "residual":
            outputs["h_out"] = OutputSpec((rows, hidden), "bf16")
        return Problem(label, dict(inputs), outputs, {"hidden": np.int32(hidden), "eps": np.float32(self.spec.eps)},
                       (KernelLaunch("rmsnorm", (rows, 1, 1), self.kernel_abi()),))

    def _reference(self, inputs: dict[str, np.ndarray]) -> Reference:
        """The range of `out`, and h_out decided, for every row."""
        x = from_bits(inputs["x"], "bf16")
        w = from_bits(inputs["w"], "bf16")
        eps = float(np.float32(self.spec.eps))
        if self.spec.form == "residual":
            h = residual_sum(x, from_bits(inputs["residual"], "bf16"))
            return Reference([expected(h, w, eps, self.spec.arithmetic, fp32_h=True), residual_expected(h)])
        return Reference([expected(x, w, eps, self.spec.arithmetic, fp32_h=False)])


def realistic_rows(rng: np.random.Generator, rows: int, hidden: int) -> np.ndarray:
    """Activations: unit normals at a per-row scale over four decades, a few outlier channels twenty times up."""
    x = rng.standard_normal((rows, hidden)) * 10.0 ** rng.uniform(-2, 2, size=(rows, 1))
    outliers = rng.choice(hidden, size=max(1, hidden // 512), replace=False)
    x[:, outliers] *= 20.0
    return x


def edge_rows(rng: np.random.Generator, hidden: int) -> np.ndarray:
    """Rows drawn on purpose: all zero, one huge element, eps-dominated, tiny and large magnitudes."""
    rows = np.zeros((len(EDGE_ROWS), hidden))
    rows[1] = rng.standard_normal(hidden)
    rows[1, rng.integers(hidden)] = 3.0e4 * np.sqrt(hidden)  # one element carries almost all of S
    rows[2] = rng.standard_normal(hidden) * 1e-6  # S / H near 1e-12, far below eps
    rows[3] = rng.standard_normal(hidden) * 1e-3
    rows[4] = rng.standard_normal(hidden) * 1e4
    return rows
