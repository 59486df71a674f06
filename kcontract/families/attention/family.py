"""The attention decode family: split-chunk decode over ring or linear caches (docs/kernel-contract.md)."""

from __future__ import annotations

import functools

import numpy as np

from kcontract.families.attention import mirrors
from kcontract.families.attention.exact import exact_quotient_bounds
from kcontract.families.attention.layout import build_problem
from kcontract.families.attention.probes import order_probe_row, probe_positions
from kcontract.families.attention.realistic import ROW_KINDS, realistic_row, sequence_rows
from kcontract.families.attention.reference import AXES, expected_outputs
from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Case, DecodeSpec
from kcontract.families.attention.stress import stress_positions, stress_row, stress_window
from kcontract.families.attention.variants import VariantPlan, plan_variants
from kcontract.families.attention.window import Window
from kcontract.families.base import Family, register
from kcontract.problem import Checked, Expected, InvarianceSet
from kcontract.seeding import stream

FILLERS = 12  # distinct other rows mixed into gate 2's batches


@register
class AttentionDecode(Family):
    """Split-chunk decode: partials per chunk at absolute positions, merged in chunk order."""

    name = "attention.decode"
    Spec = DecodeSpec
    gates = (1, 2, 3, 4)
    spec: DecodeSpec

    @property
    def scale(self) -> float:
        """The fp32 score scale the kernel receives."""
        value = self.spec.scale if self.spec.scale is not None else 1.0 / np.sqrt(self.spec.shape.head_dim)
        return float(np.float32(value))

    def case_names(self) -> list[str]:
        return [c.name for c in self.spec.cases]

    def _case(self, name: str) -> Case:
        for case in self.spec.cases:
            if case.name == name:
                return case
        raise KeyError(f"entry {self.entry} has no case {name!r}; cases: {', '.join(self.case_names())}")

    @staticmethod
    def window_of(case: Case) -> Window:
        """The case's cache layout."""
        return Window(win=case.cache.win, ring=case.cache.rows)

    def _build(self, label: str, rows: list[RowData], window: Window, **kw):
        """A call in this entry's ABI."""
        a = self.spec.arithmetic
        return build_problem(label, rows, self.spec.shape, window, a.chunk, self.scale, a.out, **kw)

    @functools.lru_cache(maxsize=8)
    def _rows(self, case_name: str) -> tuple[RowData, ...]:
        """The case's rows, drawn once per (seed, entry, case)."""
        case = self._case(case_name)
        rng = stream(self.seed, self.entry, case_name, "rows")
        window = self.window_of(case)
        return tuple(realistic_row(rng, self.spec.shape, self.spec.values, window, pos, ROW_KINDS[i % len(ROW_KINDS)],
                                   self.scale) for i, pos in enumerate(case.rows))

    def exactness(self, case: str) -> list[Checked]:
        rows = list(self._rows(case))
        window = self.window_of(self._case(case))
        problem = self._build(case, rows, window)
        return [Checked(case, problem, [expected_outputs(rows, self.spec.arithmetic, self.scale)],
                        notes={"keys": [r.pos - r.first + 1 for r in rows]})]

    def invariance(self, case: str) -> list[InvarianceSet]:
        rows = list(self._rows(case))
        window = self.window_of(self._case(case))
        rng = stream(self.seed, self.entry, case, "fillers")
        rows += [order_probe_row(rng, self.spec.shape, window, pos) for pos in probe_positions(rows)]
        fillers = self._fillers(rng, window)

        def build(label, batch, window=window, **kw):
            return self._build(label, batch, window, **kw)

        base = build(case, rows)
        plan = VariantPlan(rows=rows, fillers=fillers, window=window, chunk=self.spec.arithmetic.chunk, build=build)
        return [InvarianceSet(case, base, ("out",), plan_variants(plan, base), axes=AXES)]

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
        stress, a = self.spec.stress, self.spec.arithmetic
        window = stress_window(stress, a.chunk)
        rng = stream(self.seed, self.entry, "merge-stress")
        rows = [stress_row(rng, self.spec.shape, self.spec.values, window, pos, a.chunk, stress.gap_nats, self.scale)
                for pos in stress_positions(stress, a.chunk)]
        problem = self._build("merge-stress", rows, window)
        return [Checked("merge-stress", problem, [expected_outputs(rows, a, self.scale)])]

    def mirrors(self) -> list[Checked]:
        out: list[Checked] = []
        for layout, window in self._mirror_layouts().items():
            rng = stream(self.seed, self.entry, "mirror", layout)
            positions = self._mirror_positions(window)
            a_rows = [mirrors.mirror_a_row(rng, self.spec.shape, window, p, self.spec.arithmetic.chunk)
                      for p in positions]
            out.append(self._mirror_checked(f"mirror-A/{layout}", a_rows, window, miss=True))
            b_rows = [mirrors.mirror_b_row(self.spec.shape, window, p, self.spec.arithmetic.chunk) for p in positions]
            b_rows += self._peak_rows(window, positions[0])
            out.append(self._mirror_checked(f"mirror-B/{layout}", b_rows, window))
        return out

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
        return [mirrors.mirror_b_row(self.spec.shape, window, pos, c, [np.array(p)] * hk, tag=tag)
                for tag, p in picks.items()]

    def _mirror_checked(self, label: str, rows: list[RowData], window: Window, miss: bool = False) -> Checked:
        """The mirror call with its exact expectation (only the division and output rounding round)."""
        a = self.spec.arithmetic
        lo, hi, center = [], [], []
        for row in rows:
            num, den = mirrors.mirror_sums(row, self.spec.shape)
            r_lo, r_hi, exact = exact_quotient_bounds(num, np.broadcast_to(den, num.shape), a.div, a.out)
            lo.append(r_lo), hi.append(r_hi), center.append(exact)
        expected = Expected("out", a.out, np.stack(lo), np.stack(hi), np.stack(center), AXES)
        notes = {"rows": [r.tag for r in rows]}
        if miss:
            notes["bf16_accumulation_miss_ulps"] = mirrors.bf16_accumulation_miss(rows[0], self.spec.shape, a,
                                                                                  np.stack(lo)[0])
        return Checked(label, self._build(label, rows, window), [expected], notes=notes)
