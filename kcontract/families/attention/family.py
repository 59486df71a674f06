"""The attention decode family: split-chunk decode over ring or linear caches (docs/families/attention.md)."""

from __future__ import annotations

import functools

import numpy as np

from kcontract.families.attention import mirrors
from kcontract.families.attention.common import STRESS_CASE, WindowAttention
from kcontract.families.attention.exact import mirror_reference
from kcontract.families.attention.layout import ABI, build_problem
from kcontract.families.attention.probes import gate1_probe_rows, order_cause, order_probe_row, probe_positions
from kcontract.families.attention.realistic import ROW_KINDS, realistic_row, sequence_rows, stream_rows
from kcontract.families.attention.reference import AXES, call_reference, expected_outputs
from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import DecodeSpec
from kcontract.families.attention.stress import stress_positions, stress_row, stress_window
from kcontract.families.attention.variants import VariantPlan, factor_for, plan_variants
from kcontract.families.attention.window import Window
from kcontract.problem import Checked, InvarianceSet, Reference
from kcontract.seeding import stream

FILLERS = 12  # distinct other rows mixed into gate 2's batches
BF16 = 2  # bytes of one cache value
TEMPLATE = """\
# query head h reads key head h // (q_heads // kv_heads); the scale defaults to 1/sqrt(head_dim)
shape: {head_dim: 128, q_heads: 8, kv_heads: 2}
# the declared arithmetic the ranges allow for: keys per chunk (at absolute positions), the exp and division
# used, where p is rounded (none, bf16) and the output format (docs/kernel-contract.md 2)
arithmetic: {chunk: 256, exp: expf, prob_round: none, div: ieee, out: bf16}
# gate 3: rows over this many chunks whose maxima lie up to gap_nats apart
stress: {chunks: 24, gap_nats: 40.0}
# each case: query rows (positions) over one cache layout, each row in its own cache slot; a cache is
# {kind: linear, length: N} or {kind: ring, window: W, ring: R} (a sliding window over a ring of R >= W rows)
cases:
  - name: linear_2048
    cache: {kind: linear, length: 2048}
    rows: [2047, 1000, 256, 255, 0]
"""


class AttentionDecode(WindowAttention):
    """Split-chunk decode: partials per chunk at absolute positions, merged in eight chunk-order runs added in order."""

    name = "attention.decode"
    Spec = DecodeSpec
    abi = ABI
    spec: DecodeSpec

    @classmethod
    def template(cls) -> str:
        return TEMPLATE

    def bench_calls(self, sizes: dict[str, tuple[int, ...]]) -> list:
        from kcontract.families.attention.bench import decode_call

        return [decode_call(self.spec.shape, k, r, self.spec.arithmetic.chunk, self.scale)
                for k in sizes["keys"] for r in sizes["rows"]]

    def template_args(self) -> dict[str, int]:
        shape = self.spec.shape
        return {"head_dim": shape.head_dim, "group": shape.group, "chunk": self.spec.arithmetic.chunk}

    def case_traits(self, case: str) -> dict[str, object]:
        return {"window": "ring" if self._case(case).cache.kind == "ring" else "none"}

    def longest_keys(self, case: str) -> int:
        """Keys of the case's longest row."""
        c = self._case(case)
        window = self.window_of(c)
        return max(pos - window.first(pos) + 1 for pos in c.rows)

    def gate1_rows(self, case: str) -> int:
        """The case's rows, or its four order probes."""
        return max(len(self._case(case).rows), 4)

    def gate1_sequences(self, case: str) -> int:
        """A row's own keys each."""
        return self.gate1_rows(case)

    def case_bytes(self, case: str) -> int:
        """Host bytes a worker holds at most: the rows' keys and four order probes (the caches are Assembled from
        them), drawing the longest row, and its float64 reference's per-key arrays."""
        c, shape = self._case(case), self.spec.shape
        window = self.window_of(c)
        keys = [pos - window.first(pos) + 1 for pos in c.rows]
        per_key = shape.kv_heads * shape.head_dim * BF16 * 2  # k and v bits of one key
        sequences = sum(sorted(keys)[-c.streams:]) if c.streams else sum(keys)
        longest = max(keys)
        draw = longest * shape.kv_heads * shape.head_dim * 12  # float32 draws and their conversion
        reference = longest * shape.q_heads * 8 * 24
        return (sequences + 4 * longest) * per_key + draw + reference

    def case_buffer_bytes(self, case: str) -> int:
        """The base call's cache pool (rows, order probes, a filler slot), one variant's, and the longer cache's."""
        c, shape = self._case(case), self.spec.shape
        slots = (c.streams or len(c.rows)) + 3
        pool = slots * c.cache.rows * shape.kv_heads * shape.head_dim * BF16 * 2
        return 2 * pool + pool * factor_for(pool)

    def _build(self, label: str, rows: list[RowData], window: Window, scale: float | None = None, **kw):
        """A call in this entry's ABI (at the entry's scale unless given)."""
        a = self.spec.arithmetic
        return build_problem(label, rows, self.spec.shape, window, a.chunk, self.scale if scale is None else scale,
                             a.out, **kw)

    @functools.lru_cache(maxsize=8)
    def _rows(self, case_name: str) -> tuple[RowData, ...]:
        """The case's rows, drawn once per (seed, entry, case) and kept in the run's cache."""
        return self.memo(("rows", case_name), lambda: self._draw_rows(case_name))

    def _draw_rows(self, case_name: str) -> tuple[RowData, ...]:
        """Draw the case's rows: realistic rows, or streams whose rows share a sequence."""
        case = self._case(case_name)
        rng = stream(self.seed, self.entry, case_name, "rows")
        window = self.window_of(case)
        if case.streams:
            return tuple(stream_rows(rng, self.spec.shape, self.spec.values, window, case.rows, case.streams,
                                     self.scale))
        return tuple(realistic_row(rng, self.spec.shape, self.spec.values, window, pos, ROW_KINDS[i % len(ROW_KINDS)],
                                   self.scale) for i, pos in enumerate(case.rows))

    def _slots(self, case_name: str, rows: int) -> list[int] | None:
        """Each row's cache slot in the case's call: shared by the rows of one stream, else one per row."""
        streams = self._case(case_name).streams
        return [i % streams for i in range(rows)] if streams else None

    def exactness(self, case: str) -> list[Checked]:
        """Gate 1: the case's realistic rows in one call, with rigorous ranges."""
        rows = list(self._rows(case))
        window = self.window_of(self._case(case))
        problem = self._build(case, rows, window, slots=self._slots(case, len(rows)))
        n_part = int(problem.scalars["n_part"])
        checked = [Checked(case, problem, lambda: self._reference(rows, self.scale, n_part),
                           notes={"keys": [r.pos - r.first + 1 for r in rows]})]
        if self.spec.arithmetic.sum_order != "any":  # a declared order: any other rounds apart on the probes
            probes = self.memo(("gate1-probes", case), lambda: self._probe_rows(case, rows, window))
            call = self._build(f"{case}/order_probes", probes, window)
            parts = int(call.scalars["n_part"])
            checked.append(Checked(f"{case}/order_probes", call, lambda: self._reference(probes, self.scale, parts),
                                   notes={"keys": [r.pos - r.first + 1 for r in probes]},
                                   causes=(order_cause(self.spec.arithmetic.sum_order),)))
        return checked

    def _probe_rows(self, case: str, rows: list[RowData], window: Window) -> list[RowData]:
        """Gate 1's order probes at the case's probe positions: q = 0 over cancelling pairs of large values, across
        chunks and inside one."""
        rng = stream(self.seed, self.entry, case, "gate1-probes")
        return gate1_probe_rows(rng, self.spec.shape, window, probe_positions(rows), self.spec.arithmetic.chunk)

    def _reference(self, rows: list[RowData], scale: float, n_part: int, exact_scores: bool = False) -> Reference:
        """The output's range and, unless the kernel hides them, its partials' at fp32 resolution."""
        return call_reference(rows, self.spec.arithmetic, scale, n_part, exact_scores, kernel=self.exports)

    def variant_sets(self, case: str) -> list[InvarianceSet]:
        """Gate 2: the case's rows plus order probes, and every variant call."""
        rows = list(self._rows(case))
        window = self.window_of(self._case(case))
        probes, fillers = self.memo(("gate2-rows", case), lambda: self._gate2_rows(case, rows, window))
        rows += probes

        def build(label, batch, window=window, **kw):
            return self._build(f"{case}/{label}", batch, window, **kw)

        slots = self._slots(case, len(self._rows(case)))
        if slots is not None:  # the order probes get slots of their own after the streams
            slots += [max(slots) + 1 + i for i in range(len(rows) - len(slots))]
        base = build("base", rows, slots=slots)
        plan = VariantPlan(rows=rows, fillers=fillers, window=window, chunk=self.spec.arithmetic.chunk, build=build,
                           slots=slots)
        return [InvarianceSet(case, base, ("out",), plan_variants(plan, base), axes=AXES)]

    def _gate2_rows(self, case: str, rows: list[RowData], window: Window) -> tuple[list[RowData], list[RowData]]:
        """Gate 2's order probes (at the case's longest and a middle position) and its filler rows."""
        rng = stream(self.seed, self.entry, case, "fillers")
        probes = [order_probe_row(rng, self.spec.shape, window, pos) for pos in probe_positions(rows)]
        return probes, self._fillers(rng, window)

    def _fillers(self, rng, window: Window) -> list[RowData]:
        """Other rows at other positions, all reading one sequence so a batch of 64 needs two cache slots."""
        c = self.spec.arithmetic.chunk
        if window.win == 0:
            top = min(window.ring - 1, 4 * c + 37)
            positions = [int(p) for p in rng.integers(0, top + 1, size=FILLERS)]
        else:
            top = 2 * window.ring + int(rng.integers(0, window.ring))
            band = window.ring - window.win  # rows this far behind the newest still find their whole window
            positions = [int(p) for p in top - rng.integers(0, band + 1, size=FILLERS)]
        return sequence_rows(rng, self.spec.shape, self.spec.values, window, top, positions, self.scale)

    def merge_stress(self) -> list[Checked]:
        """Gate 3: rows whose chunk maxima lie tens of nats apart, over 128+ chunks."""
        stress, a = self.spec.stress, self.spec.arithmetic
        window = stress_window(stress, a.chunk)
        def draw() -> list[RowData]:
            rng = stream(self.seed, self.entry, "merge-stress")
            return [stress_row(rng, self.spec.shape, self.spec.values, window, pos, a.chunk, stress.gap_nats,
                               self.scale) for pos in stress_positions(stress, a.chunk)]

        rows = self.memo(("merge-stress",), draw)
        problem = self._build(STRESS_CASE, rows, window)
        return [Checked(STRESS_CASE, problem, lambda: Reference([expected_outputs(rows, a, self.scale)]))]

    def mirror(self, kind: str, layout: str) -> Checked:
        """Mirror A (q = 0) or B (hard selection) over one cache layout."""
        window = self._mirror_layouts()[layout]
        positions = self._mirror_positions(window)
        chunk = self.spec.arithmetic.chunk
        if kind == "A":
            rng = stream(self.seed, self.entry, "mirror", layout)
            rows = [mirrors.mirror_a_row(rng, self.spec.shape, window, p, chunk) for p in positions]
            return self._mirror_checked(f"mirror-A/{layout}", rows, window, miss=True)
        if kind == "C":
            rows = self.memo(("mirror-C", layout), lambda: self._mirror_c_rows(layout, window, positions))
            problem = self._build(f"mirror-C/{layout}", rows, window, scale=mirrors.C_SCALE)
            n_part = int(problem.scalars["n_part"])
            return Checked(f"mirror-C/{layout}", problem,
                           lambda: self._reference(rows, mirrors.C_SCALE, n_part, exact_scores=True),
                           notes={"rows": [r.tag for r in rows]})
        rows = [mirrors.mirror_b_row(self.spec.shape, window, p, chunk, self.scale) for p in positions]
        rows += self._peak_rows(window, positions[0])
        return self._mirror_checked(f"mirror-B/{layout}", rows, window)

    def _mirror_c_rows(self, layout: str, window: Window, positions: list[int]) -> list[RowData]:
        """Exact-score rows at the mirror positions, plain and peaked alternately."""
        rng = stream(self.seed, self.entry, "mirror-C", layout)
        return [mirrors.mirror_c_row(rng, self.spec.shape, window, p, peaked=bool(i % 2))
                for i, p in enumerate(positions)]

    def _mirror_layouts(self) -> dict[str, Window]:
        """One mirror layout per distinct cache shape among the cases, windows capped for exact sums."""
        layouts: dict[str, Window] = {}
        cap = self.spec.mirror.max_keys
        for case in self.spec.cases:
            w = self.window_of(case)
            if w.win == 0:
                w = Window(0, min(w.ring, cap))
                layouts.setdefault(f"linear{w.ring}", w)
            else:
                win = min(w.win, cap)
                layouts.setdefault(f"ring{w.ring}_w{win}", Window(win, max(w.ring - w.win + win, win + 1)))
        return layouts

    def _mirror_positions(self, window: Window) -> list[int]:
        """Rows ending at the cache's end, on chunk edges, mid-chunk, and (rings) after wrapping."""
        c = self.spec.arithmetic.chunk
        if window.win == 0:
            cands = [window.ring - 1, c - 1, c, 2 * c + 17, 0]
            return sorted({p for p in cands if 0 <= p < window.ring}, reverse=True)
        return [3 * window.ring + window.win // 2, window.win - 1, window.ring + c - 1, 5 * window.ring + c]

    def _peak_rows(self, window: Window, pos: int) -> list[RowData]:
        """Single peaks at the last key, the window's first key and a chunk edge; outside keys are 'on' too."""
        first = window.first(pos)
        n = pos - first + 1
        c = self.spec.arithmetic.chunk
        edge = min(n - 1, c - 1 - first % c)
        picks = {"peak-last": [n - 1], "peak-first": [0], "peak-chunk-edge": sorted({edge, min(n - 1, edge + 1)})}
        hk = self.spec.shape.kv_heads
        return [mirrors.mirror_b_row(self.spec.shape, window, pos, c, self.scale, [np.array(p)] * hk, tag=tag)
                for tag, p in picks.items()]

    def _mirror_checked(self, label: str, rows: list[RowData], window: Window, miss: bool = False) -> Checked:
        """The mirror call with its exact expectation (only the division and output rounding round)."""
        return Checked(label, self._build(label, rows, window),
                       lambda: mirror_reference(rows, self.spec.shape, self.spec.arithmetic, miss),
                       notes={"rows": [r.tag for r in rows]})
