"""The matmul family: realistic token rows, their batching variants across M (batches around the kernel's row
tile), split-K stress rows whose pieces differ in sign and magnitude, and integer rows whose every partial sum is
exact."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kcontract.errors import UsageError
from kcontract.families.matmul import drift
from kcontract.families.matmul.orders import probe_splits, separated
from kcontract.families.matmul.reference import expected
from kcontract.families.matmul.spec import Case, MatmulSpec
from kcontract.family.base import Family
from kcontract.family.torch_op import FromTorch, TorchOp
from kcontract.family.batching import BATCH_SIZES, batch_variants
from kcontract.gatetable import Kind, Suite
from kcontract.numerics import bf16_bits_of_finite, from_bits, round_to, to_bits
from kcontract.problem import (Checked, InvarianceSet, KernelLaunch, LaunchShape, OutputSpec, Problem, Reference,
                               TensorMap)
from kcontract.seeding import stream

ABI = ("a", "b", "out", "m", "n", "k")  # a bf16 [m, k], b bf16 [n, k], out [m, n] in the entry's format
CUDA_ARGS = ("a_map", "b_map", "out", "m", "n", "k")  # `abi: tensor_maps`: tensor maps of a and b
SHARED = ("tile_k", "multiple")  # what a kernel exports once: its k tile (and, with tensor maps, the K, N multiple)
TILE = ("tile_m", "tile_n")  # and per symbol the schedule launches, as `{symbol}_tile_m`: that symbol's tile
THREADS = 384  # a producer warpgroup and two consumer warpgroups
FILLERS = 5  # other rows mixed into the variants suite's batches
VARIANT_ROWS = 32  # rows of a case that gate 2 runs alone and in batches
ORDER_ROWS = 16  # rows of each order probe set
STRESS_ROWS, EXACT_ROWS = 8, 8
ORDER_SHIFT = 1.0e5  # order probes: bf16 rows of a pair all but equal to it, partials far above the output
ROW_TILE = 128  # the row tile batches are sized around where the kernel exports none (a Python kernel)
TEMPLATE = """\
# the declared accumulation: fp32 sums in any order, or tensor-core k-steps (mma_bf16) chained over each of
# split_k pieces of K (whole k tiles of k_tile; fixed, never chosen from M), the pieces added in order in fp32;
# out: bf16 or fp32
arithmetic: {accumulate: fp32, split_k: 1, k_tile: 64, out: bf16}
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
    bench_sizes = {"rows": (1, 4, 16, 64, 256, 1024, 4096)}
    spec: MatmulSpec

    @classmethod
    def from_torch_op(cls, op: TorchOp) -> FromTorch | None:
        """An entry of torch's mm, addmm or linear, as drift captured it."""
        return drift.from_torch_op(op)

    @classmethod
    def template(cls) -> str:
        return TEMPLATE

    def launch_exports(self) -> tuple[str, ...]:
        shared = SHARED if self.spec.abi == "tensor_maps" else SHARED[:1]
        return shared + tuple(f"{role}_{name}" for role in self._roles() for name in TILE)

    def template_args(self) -> dict[str, int]:
        """{split_k} and {out_bf16} for a CUDA kernel's symbols."""
        return {"split_k": self.spec.arithmetic.split_k, "out_bf16": int(self.spec.arithmetic.out == "bf16")}

    def cases(self, suite: Suite) -> list[str]:
        prefix = {Suite.STRESS: "stress/", Suite.EXACT: "exact/"}.get(suite, "")
        return [prefix + c.name for c in self.spec.cases]

    def checks(self, suite: Suite, case: str) -> list[Checked]:
        inputs = self._inputs(suite, case)
        return [Checked(case, self._problem(case, inputs), lambda: self._reference(inputs))]

    def invariance(self, suite: Suite, case: str) -> list[InvarianceSet]:
        """The case's rows in every batch, and the same batches of order probes built against every split a kernel
        could plausibly take (the declared one, 2, 3 and 4 pieces): whatever is declared, a sum that cuts K
        elsewhere, or merges its pieces in another order, rounds apart on them."""
        inputs = {"a": self._inputs(Suite.REALISTIC, case)["a"][:VARIANT_ROWS], "b": self._weights(case)}
        sets = [self._variant_set(case, "", inputs)]
        c, arith = self._case(case), self.spec.arithmetic
        splits = probe_splits(c.k, arith.k_tile, [(lo, hi) for lo, hi in arith.pieces(c.k) if hi > lo])
        probes = self.memo(("order", case), lambda: [
            order_rows(inputs["a"][:ORDER_ROWS], inputs["b"], pieces,
                       stream(self.seed, self.entry, case, "order", *([] if label == "declared" else [label])))
            for label, pieces in splits])
        told = self.memo(("orders", case), lambda: separated(probes, c.k, arith.k_tile)) if probes else None
        for i, ((label, _), probe) in enumerate(zip(splits, probes)):
            sets.append(self._variant_set(case, f"order_probes/{label}/", probe, told if i == 0 else None))
        return sets

    def _variant_set(self, case: str, title: str, inputs: dict[str, np.ndarray], orders=None) -> InvarianceSet:
        """Base rows alone and in batches with filler rows, every variant labelled `title` first."""
        fillers = self.memo(("fillers", case), lambda: self._rows(case, "fillers", FILLERS))

        def build(kind: str, label: str, members: list[int]) -> Problem:
            a = np.stack([inputs["a"][m] if m >= 0 else fillers[-1 - m] for m in members])
            return self._problem(f"{case}/{title}{label}", {"a": a, "b": inputs["b"]})

        variants = batch_variants(len(inputs["a"]), FILLERS, build, self.batch_sizes())
        return InvarianceSet(case, self._problem(f"{case}/{title}base", inputs), ("out",),
                             (replace(v, label=title + v.label) for v in variants), axes=("row",), orders=orders)

    def batch_sizes(self) -> tuple[int, ...]:
        """Batches of every size the kernel's row tiling treats differently: a few rows; of each scheduled tile
        one tile less one, one tile, one more, and two tiles and one; and both sides of every schedule edge."""
        sizes = set(BATCH_SIZES)
        for role in self._roles():
            tile = self.exports.get(f"{role}_tile_m", ROW_TILE)
            sizes |= {tile - 1, tile, tile + 1, 2 * tile + 1}
        sizes |= {rows for edge in self.spec.schedule if edge > 1 for rows in (edge - 1, edge)}
        return tuple(sorted(sizes))

    def launch_shapes(self) -> list[LaunchShape]:
        return [LaunchShape(role, THREADS) for role in self._roles()]

    def _roles(self) -> list[str]:
        """The kernel symbols the schedule launches, once each."""
        return list(dict.fromkeys(self.spec.schedule.values()))

    def hints(self, kind: Kind) -> tuple[str, ...]:
        extra = {Kind.RANGES: ("a K tail dropped", "a bf16 or fp16 accumulator", "split-K pieces merged without "
                               "their full fp32 sum, or a piece lost"),
                 Kind.INVARIANCE: ("split-K or the tile size chosen from M", "atomics in the split-K merge")}
        return extra.get(kind, ()) + super().hints(kind)

    def case_bytes(self, case: str) -> int:
        c = self._case(case)
        return (c.m * c.k + c.n * c.k) * 10 + c.m * c.n * 8 * 6

    def case_buffer_bytes(self, case: str) -> int:
        c = self._case(case)
        return (c.m * c.k + c.n * c.k) * 2 + c.m * c.n * 4

    def reference_device_bytes(self, case: str) -> int:
        """The float64 product's output and its k-step replay's partial sums, and cuBLAS's workspace."""
        c = self._case(case)
        return c.m * c.n * 8 * 2 + (128 << 20)

    def bench_calls(self, sizes: dict[str, tuple[int, ...]]) -> list:
        from kcontract.families.matmul.bench import matmul_call

        shapes = sorted({(c.k, c.n) for c in self.spec.cases})
        return [matmul_call(rows, k, n, self.spec.arithmetic, self._launch(rows, k, n),
                            self.exports.get(f"{self.spec.role(rows)}_tile_m", ROW_TILE),
                            self.exports.get(f"{self.spec.role(rows)}_tile_n", 1)) for k, n in shapes
                for rows in sizes["rows"]]

    def _case(self, name: str) -> Case:
        return next(c for c in self.spec.cases if c.name == name.rpartition("/")[2])

    def _inputs(self, suite: Suite, case: str) -> dict[str, np.ndarray]:
        """bf16 bit patterns of a [rows, K] and b [N, K] for a range suite: realistic rows against the case's
        weights, stress rows against them with pairs of pieces negated, or integer rows and weights."""
        c = self._case(case)
        pieces = [(lo, hi) for lo, hi in self.spec.arithmetic.pieces(c.k) if hi > lo]
        if suite is Suite.EXACT:
            return self.memo((suite.value, case), lambda: exact_rows(stream(self.seed, self.entry, case, "exact"),
                                                                     EXACT_ROWS, c.n, c.k, pieces))
        if suite is Suite.STRESS:
            return self.memo((suite.value, case), lambda: stress_rows(self._rows(case, "stress", STRESS_ROWS),
                                                                      self._weights(case), pieces or halves(c.k),
                                                                      stream(self.seed, self.entry, case, "shifts")))
        return {"a": self.memo(("rows", case), lambda: self._rows(case, "rows", c.m)), "b": self._weights(case)}

    def _weights(self, case: str) -> np.ndarray:
        """The case's weight rows b [N, K] as bf16 bits: fp32 unit normals times RN32(1 / sqrt(K)), then RN-even."""
        c = self._case(case)

        def draw() -> np.ndarray:
            rng = stream(self.seed, self.entry, case, "weights")
            b = rng.standard_normal((c.n, c.k), dtype=np.float32)
            b *= np.float32(c.k ** -0.5)
            return bf16_bits_of_finite(b)
        return self.memo(("weights", case), draw)

    def _rows(self, case: str, what: str, count: int) -> np.ndarray:
        """Token rows a [count, K] as bf16 bits: fp32 unit normals, each row at its own scale over two decades."""
        rng = stream(self.seed, self.entry, case, what)
        scale = (10.0 ** rng.uniform(-1, 1, size=(count, 1))).astype(np.float32)
        a = rng.standard_normal((count, self._case(case).k), dtype=np.float32)
        a *= scale
        return bf16_bits_of_finite(a)

    def _launch(self, m: int, k: int, n: int) -> tuple[KernelLaunch, ...]:
        """The CUDA launch of the symbol the schedule gives M rows (none where no kernel exported its tiles: a
        Python kernel ignores launches)."""
        if not self.exports:
            return ()
        role = self.spec.role(m)
        tk = self.exports["tile_k"]
        tm, tn = (self.exports[f"{role}_{name}"] for name in TILE)
        arith = self.spec.arithmetic
        if tk != arith.k_tile:
            raise UsageError(f"entry {self.entry}: its kernel cuts K in tiles of {tk} (its export tile_k) and the "
                             f"arithmetic declares k_tile {arith.k_tile}: declare the kernel's")
        if self.spec.abi == "pointers":
            return (KernelLaunch(role, (-(-n // tn), -(-m // tm), 1), ABI),)
        multiple = self.exports["multiple"]
        if k % multiple or n % multiple:
            raise UsageError(f"entry {self.entry}: K {k} and N {n} must be multiples of {multiple} for its kernel "
                             f"(its export multiple): change the case's shape")
        grid = (-(-n // tn), -(-m // tm), arith.split_k)
        maps = {"a_map": TensorMap("a", (tk, min(tm, m))), "b_map": TensorMap("b", (tk, tn))}
        return (KernelLaunch(role, grid, CUDA_ARGS, maps),)

    def _problem(self, label: str, inputs: dict[str, np.ndarray]) -> Problem:
        m, k = inputs["a"].shape
        n = inputs["b"].shape[0]
        return Problem(label, dict(inputs), {"out": OutputSpec((m, n), self.spec.arithmetic.out)},
                       {"m": np.int32(m), "n": np.int32(n), "k": np.int32(k)}, self._launch(m, k, n))

    def _reference(self, inputs: dict[str, np.ndarray]) -> Reference:
        a, b = from_bits(inputs["a"], "bf16"), from_bits(inputs["b"], "bf16")
        return Reference([expected(a, b, self.spec.arithmetic)])


def exact_rows(rng: np.random.Generator, rows: int, n: int, k: int, pieces: list[tuple[int, int]]) -> dict:
    """Small integers: every product and partial sum exact in fp32 (below 2^24), far from exact in bf16. Each
    piece's first and last term is 16 x 15, so a dropped one shows; the other terms are odd times odd, and an odd
    count of them makes every output odd, never a zero whose sign the declared arithmetic leaves open."""
    odd = [(2 * rng.integers(-8, 8, size=(count, k), dtype=np.int8) + 1).astype(np.float32) for count in (rows, n)]
    even = sorted({i for lo, hi in pieces for i in (lo, hi - 1)})
    if (k - len(even)) % 2 == 0:
        even.append(next(i for i in range(k) if i not in even))
    for x, value in zip(odd, (16, 15)):
        x[:, even] = value
    return {"a": bf16_bits_of_finite(odd[0]), "b": bf16_bits_of_finite(odd[1])}


def halves(k: int) -> list[tuple[int, int]]:
    """K's two halves, the stress pieces of an accumulation without a declared split."""
    return [(0, k // 2), (k // 2, 2 * (k // 2))]


def stress_rows(a: np.ndarray, b: np.ndarray, pieces: list[tuple[int, int]], rng: np.random.Generator) -> dict:
    """Rows whose pieces' partials have opposite signs and magnitudes decades apart: piece j's row values shifted by
    a constant near 10^(2 + 2 (j % 3)) of random sign; of each pair of equal-length pieces the second takes the
    first's shift and the negated weights, so their partials cancel and the output lies far below them."""
    rows = a.shape[0]
    shifts = [rng.uniform(1, 4, size=(rows, 1)) * 10.0 ** (2 + 2 * (j % 3)) * rng.choice([-1, 1], size=(rows, 1))
              for j in range(len(pieces))]
    b = b.copy()
    for j, ((lo1, hi1), (lo2, hi2)) in enumerate(zip(pieces[::2], pieces[1::2])):
        if hi1 - lo1 == hi2 - lo2:
            shifts[2 * j + 1] = shifts[2 * j]
            b[:, lo2:hi2] = b[:, lo1:hi1] ^ np.uint16(0x8000)  # bf16 negation is exact
    x = from_bits(a, "bf16")
    for (lo, hi), shift in zip(pieces, shifts):
        x[:, lo:hi] += shift
    return {"a": bits(x), "b": b}


def order_rows(a: np.ndarray, b: np.ndarray, pieces: list[tuple[int, int]], rng: np.random.Generator) -> dict:
    """Rows on which the pieces' order shows: of each pair of pieces (0 and 1, 2 and 3, ...) the common length is
    shifted by one constant near ORDER_SHIFT of random sign per row, against weights the second piece negates, so
    the pair's partials cancel. Added in the declared order a pair cancels before the rest arrives; in another
    order its rounding errors, at the partials' magnitude, land in an output far smaller."""
    rows = a.shape[0]
    b = b.copy()
    x = from_bits(a, "bf16")
    for (lo1, hi1), (lo2, hi2) in zip(pieces[::2], pieces[1::2]):
        common = min(hi1 - lo1, hi2 - lo2)
        shift = rng.uniform(1, 4, size=(rows, 1)) * ORDER_SHIFT * rng.choice([-1, 1], size=(rows, 1))
        b[:, lo2:lo2 + common] = b[:, lo1:lo1 + common] ^ np.uint16(0x8000)  # bf16 negation is exact
        x[:, lo1:lo1 + common] += shift
        x[:, lo2:lo2 + common] += shift
    return {"a": bits(x), "b": b}


def bits(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of float64 values, rounded to nearest even."""
    return to_bits(round_to(x, "bf16"), "bf16").astype(np.uint16)
