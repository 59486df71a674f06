"""The attention prompt family: prompt chunks of consecutive rows, causal with image spans, over ring or linear
caches, as split-chunk partials at absolute positions and a merge, or one fused launch that merges online
(docs/families/attention.md 7)."""

from __future__ import annotations

import functools

from kcontract.families.attention.common import STRESS_CASE, WindowAttention
from kcontract.families.attention.exact import mirror_reference
from kcontract.families.attention.mirrors import C_SCALE, mirror_b_row
from kcontract.families.attention.prompt_bench import prompt_call
from kcontract.families.attention.prompt_layout import ABI, ABIS, BAND, build_prompt_problem, partials_needed
from kcontract.families.attention.prompt_rows import (
    PromptSeq,
    key_span,
    mirror_a_sequence,
    mirror_c_sequence,
    realistic_sequence,
    same_query_sequence,
)
from kcontract.families.attention.probes import gate1_probe_rows, order_cause
from kcontract.families.attention.prompt_spec import PromptSpec, Sequence
from kcontract.families.attention.prompt_variants import PromptPlan, plan_prompt_variants
from kcontract.families.attention.shared_scores import shared_scores
from kcontract.families.attention.reference import AXES, call_reference, expected_outputs, row_maxima
from kcontract.families.attention.stress import first_key_peak, stress_row
from kcontract.families.attention.window import Window
from kcontract.numerics.xp import reference_device
from kcontract.problem import Checked, InvarianceSet, LaunchShape, Reference
from kcontract.seeding import stream

BF16 = 2
FUSED_THREADS = 128  # a warpgroup: the fused block's threads per 128 output dims
FILLER_ROWS = 24  # rows of gate 2's filler sequence
MIRROR_ROWS = 48  # rows of a mirror chunk
STRADDLE = 7  # gate 3's straddling rows before a chunk's first key: odd, so no tile of 2 to 64 rows ends there
P_BF16 = {"none": 0, "bf16": 1}  # the kernel template's p rounding per declared prob_round (others: no instance)
TEMPLATE = """\
# split: a partials launch per chunk, then a merge launch; fused: one launch that merges online (then declare
# arithmetic sum_order: online_mma and partials: hidden, docs/kernel-contract.md 7)
abi: split
# query head h reads key head h // (q_heads // kv_heads); the scale defaults to 1/sqrt(head_dim)
shape: {head_dim: 128, q_heads: 8, kv_heads: 2}
# the declared arithmetic the ranges allow for: keys per chunk (at absolute positions), the exp and division
# used, where p is rounded (none, bf16) and the output format (docs/kernel-contract.md 2)
arithmetic: {chunk: 256, exp: expf, prob_round: none, div: ieee, out: bf16}
# gate 3: chunks of rows whose chunk maxima lie up to gap_nats apart
stress: {chunks: 24, gap_nats: 40.0}
# each case: sequences of consecutive rows (causal; rows inside an image span [first, last] see the whole span)
# over one cache layout: {kind: linear, length: N} or {kind: ring, window: W, ring: R}
cases:
  - name: linear_1024
    cache: {kind: linear, length: 1024}
    sequences:
      - {start: 1000, rows: 24, images: [[1005, 1012]]}
      - {start: 0, rows: 8}
"""


class AttentionPrompt(WindowAttention):
    """Prompt chunks: each row's keys [first of its position, its position or its image span's end], in chunks at
    absolute positions; partials per chunk, merged in chunk order as in decode (abi: split), or merged online in
    one launch that writes the output and each row's largest score (abi: fused)."""

    name = "attention.prompt"
    Spec = PromptSpec
    abi = ABI
    spec: PromptSpec

    @classmethod
    def template(cls) -> str:
        return TEMPLATE

    @property
    def fused(self) -> bool:
        """Whether the entry's kernel is the fused ABI's one launch."""
        return self.spec.abi == "fused"

    def kernel_abi(self) -> tuple[str, ...]:
        return ABIS[self.spec.abi]

    def compared_outputs(self) -> tuple[str, ...]:
        """The outputs gate 2 compares bit for bit: out, and the fused ABI's row_m."""
        return ("out", "row_m") if self.fused else ("out",)

    def launch_shapes(self) -> list[LaunchShape]:
        """The fused `attend` block: a warpgroup per 128 output dims (a kernel declares its own under `launch`)."""
        if not self.fused:
            return super().launch_shapes()
        return [LaunchShape("attend", FUSED_THREADS * -(-self.spec.shape.head_dim // 128))]

    def exactness(self, case: str) -> list[Checked]:
        """Gate 1: the case's sequences in one call, every row with its rigorous ranges; under a declared order,
        also order probes, on which any other order of the sums (the merge's above all) rounds apart."""
        window = self.window_of(self._case(case))
        checked = [self._checked(case, list(self._seqs(case)), window)]
        if self.spec.arithmetic.sum_order != "any":
            probes = self.memo(("gate1-probes", case), lambda: self._probe_seqs(case, window))
            checked.append(self._checked(f"{case}/order_probes", probes, window,
                                         causes=(order_cause(self.spec.arithmetic.sum_order),)))
        return checked

    def _probe_seqs(self, case: str, window: Window) -> list[PromptSeq]:
        """A band of rows ending at the case's last position and at a middle sequence's end, each row with q = 0
        over the probe's keys (cancelling pairs of large values in every column)."""
        rng = stream(self.seed, self.entry, case, "gate1-probes")
        ends = sorted({s.end for s in self._case(case).sequences})
        positions = sorted({ends[-1], ends[len(ends) // 2]}, reverse=True)
        bands = {pos: _probe_band(pos, window) for pos in positions}
        probes = gate1_probe_rows(rng, self.spec.shape, window, positions, self.spec.arithmetic.chunk,
                                  [pos - bands[pos] + 1 for pos in positions])  # inside chunks every row sees
        return [same_query_sequence(Sequence(start=row.pos - bands[row.pos] + 1, rows=bands[row.pos]), row)
                for row in probes]

    def template_args(self) -> dict[str, int]:
        shape = self.spec.shape
        a = self.spec.arithmetic
        return {"head_dim": shape.head_dim, "group": shape.group, "chunk": a.chunk, "band": BAND,
                "p_bf16": P_BF16.get(a.prob_round, -1)}

    def case_traits(self, case: str) -> dict[str, object]:
        c = self._case(case)
        return {"window": "ring" if c.cache.kind == "ring" else "none", "images": "spans" if c.images else "none"}

    def longest_keys(self, case: str) -> int:
        """Keys of the case's longest sequence."""
        c = self._case(case)
        window = self.window_of(c)
        return max(s.end - window.first(s.start) + 1 for s in c.sequences)

    def gate1_rows(self, case: str) -> int:
        """The case's rows, or its order probes' bands (two kinds at up to two positions)."""
        return max(self._case(case).rows, 4 * BAND)

    def gate1_sequences(self, case: str) -> int:
        """The case's sequences, or its order probes' four."""
        return max(len(self._case(case).sequences), 4)

    def case_bytes(self, case: str) -> int:
        """Host bytes a worker holds at most: each sequence's keys (twice: drawn and laid out), the float32 draws
        of the longest, and the per-key arrays of one row's float64 reference."""
        c, shape = self._case(case), self.spec.shape
        window = self.window_of(c)
        keys = [s.end - window.first(s.start) + 1 for s in c.sequences]
        per_key = shape.kv_heads * shape.head_dim * BF16 * 2
        draw = max(keys) * shape.kv_heads * shape.head_dim * 12
        reference = max(keys) * shape.q_heads * 8 * 24
        queries = c.rows * shape.q_heads * shape.head_dim * 10
        return 2 * sum(keys) * per_key + draw + reference + queries

    def case_buffer_bytes(self, case: str) -> int:
        """The base call's cache pool (a slot per sequence and two spare), the longer cache's, and the partials
        (the fused ABI writes none)."""
        c, shape = self._case(case), self.spec.shape
        pool = (len(c.sequences) + 2) * c.cache.rows * shape.kv_heads * shape.head_dim * BF16 * 2
        if self.fused:
            return 2 * pool + pool * 16
        window = self.window_of(c)
        n_part = max(partials_needed(window.first(s.start), s.end, self.spec.arithmetic.chunk) for s in c.sequences)
        partials = c.rows * shape.q_heads * n_part * (shape.head_dim + 2) * 4 * 2
        return 2 * pool + pool * 16 + partials

    def _build(self, label: str, seqs: list[PromptSeq], window: Window, scale: float | None = None, **kw):
        """A call in the entry's prompt ABI at the entry's scale unless given."""
        a = self.spec.arithmetic
        return build_prompt_problem(label, seqs, self.spec.shape, window, a.chunk,
                                    self.scale if scale is None else scale, a.out, abi=self.spec.abi, **kw)

    @functools.lru_cache(maxsize=8)
    def _seqs(self, case_name: str) -> tuple[PromptSeq, ...]:
        """The case's sequences, drawn once per (seed, entry, case) and kept in the run's cache."""
        return self.memo(("seqs", case_name), lambda: self._draw(case_name))

    def _draw(self, case_name: str) -> tuple[PromptSeq, ...]:
        case = self._case(case_name)
        rng = stream(self.seed, self.entry, case_name, "sequences")
        window = self.window_of(case)
        return tuple(realistic_sequence(rng, self.spec.shape, self.spec.values, window, seq, i, self.scale)
                     for i, seq in enumerate(case.sequences))

    def _checked(self, label: str, seqs: list[PromptSeq], window: Window, scale: float | None = None,
                 exact_scores: bool = False, causes: tuple[str, ...] = ()) -> Checked:
        """A call over `seqs` with the rigorous ranges of every row (`causes`: what a failure on them means)."""
        scale = self.scale if scale is None else scale
        problem = self._build(label, seqs, window, scale=scale)
        n_part = int(problem.scalars["n_part"]) if "n_part" in problem.scalars else None
        a = self.spec.arithmetic

        def reference() -> Reference:
            # replayed scores from one batched replay; mirror C's (exact scores, no online merge) on the host only:
            # on a GPU each of its rows replays its own on the device, no scores copied back and forth
            shared = a.replays_scores and (a.merges_online or not exact_scores or reference_device() == "cpu")
            rows = [r for s in seqs for r in (with_shared_scores(s, window, scale, a.score_grouping) if shared
                                              else s.rows(window))]
            return call_reference(rows, a, scale, n_part, exact_scores, row_m=self.fused, kernel=self.exports)

        return Checked(label, problem, reference,
                       notes={"keys": [r.pos - r.first + 1 for s in seqs for r in s.rows(window)]}, causes=causes)

    def variant_sets(self, case: str) -> list[InvarianceSet]:
        """Gate 2: the case's call, and every variant call."""
        seqs = list(self._seqs(case))
        window = self.window_of(self._case(case))

        def build(label, batch, window=window, **kw):
            return self._build(f"{case}/{label}", batch, window, **kw)

        base = build("base", seqs)
        plan = PromptPlan(seqs=seqs, filler=self.memo(("filler", case), lambda: self._filler(case, window)),
                          window=window, build=build)
        return [InvarianceSet(case, base, self.compared_outputs(), plan_prompt_variants(plan, base), axes=AXES)]

    def _filler(self, case: str, window: Window) -> PromptSeq:
        """Another sequence: FILLER_ROWS rows ending where the case's first sequence ends."""
        first = self._case(case).sequences[0]
        rows = min(FILLER_ROWS, first.rows)
        seq = Sequence(start=first.end - rows + 1, rows=rows)
        rng = stream(self.seed, self.entry, case, "filler")
        return realistic_sequence(rng, self.spec.shape, self.spec.values, window, seq, 1, self.scale)

    def merge_stress(self) -> list[Checked]:
        """Gate 3: two 16-row chunks of one sequence whose chunk maxima lie tens of nats apart, the second across a
        chunk's first key, where that chunk's peak sits (STRADDLE rows before it, so a tile of rows holds rows on
        both sides); an online merge also gets both with chunk maxima that rise chunk by chunk (the row that sees
        the new chunk's peak rescales while its tile-mates keep their state), and is checked by its replay (the
        order-free range assumes a two-pass merge)."""
        stress, a = self.spec.stress, self.spec.arithmetic
        n, c = stress.chunks, a.chunk
        window = Window(win=0, ring=n * c)

        def draw() -> list[PromptSeq]:
            rng = stream(self.seed, self.entry, "merge-stress")
            base = stress_row(rng, self.spec.shape, self.spec.values, window, n * c - 1, c, stress.gap_nats,
                              self.scale)
            edge = first_key_peak(n // 2) * c
            ends = [Sequence(start=n * c - BAND, rows=BAND), Sequence(start=max(0, edge - STRADDLE), rows=BAND)]
            seqs = [same_query_sequence(seq, base) for seq in ends]
            if a.merges_online:
                rising = stress_row(rng, self.spec.shape, self.spec.values, window, n * c - 1, c, stress.gap_nats,
                                    self.scale, rising=True)
                seqs += [same_query_sequence(seq, rising) for seq in ends]
            return seqs

        seqs = self.memo(("merge-stress",), draw)
        if a.merges_online:
            return [self._checked(STRESS_CASE, seqs, window)]
        rows = [r for s in seqs for r in s.rows(window)]
        problem = self._build(STRESS_CASE, seqs, window)
        return [Checked(STRESS_CASE, problem, lambda: Reference([expected_outputs(rows, a, self.scale)]))]

    def _mirror_layouts(self) -> dict[str, tuple[Window, list[Sequence]]]:
        """One mirror layout per distinct cache shape among the cases, capped for exact sums, with its chunks:
        one at the layout's end (through an image span where the entry's cases have them), one across the first
        chunk edge."""
        layouts: dict[str, tuple[Window, list[Sequence]]] = {}
        cap, c = self.spec.mirror.max_keys, self.spec.arithmetic.chunk
        images = any(case.images for case in self.spec.cases)
        for case in self.spec.cases:
            w = self.window_of(case)
            if w.win == 0:
                w = Window(0, min(w.ring, cap))
                top, name = w.ring - 1, f"linear{w.ring}"
            else:
                win = min(w.win, cap)
                w = Window(win, max(w.ring - w.win + win, win + MIRROR_ROWS))
                top, name = 3 * w.ring + win // 2, f"ring{w.ring}_w{win}"
            rows = min(MIRROR_ROWS, top + 1, w.ring - w.win + 1 if w.win else top + 1)
            start = top - rows + 1
            spans = [(start + rows // 4, start + rows // 2)] if images else []
            edge = Sequence(start=max(0, c - BAND // 2), rows=BAND) if c - 1 < top - MIRROR_ROWS else None
            layouts.setdefault(name, (w, [Sequence(start=start, rows=rows, images=spans)] + ([edge] if edge else [])))
        return layouts

    def mirror(self, kind: str, layout: str) -> Checked:
        """Mirror A (q = 0), B (hard selection) or C (exact scores) over a layout's chunks."""
        window, seqs = self._mirror_layouts()[layout]
        label = f"mirror-{kind}/{layout}"
        c = self.spec.arithmetic.chunk
        if kind == "C":
            def draw_c() -> list[PromptSeq]:
                rng = stream(self.seed, self.entry, "mirror-C", layout)
                return [mirror_c_sequence(rng, self.spec.shape, window, s, peaked=bool(i % 2))
                        for i, s in enumerate(seqs)]

            return self._checked(label, self.memo(("mirror-C", layout), draw_c), window, scale=C_SCALE,
                                 exact_scores=True)
        if kind == "A":
            rng = stream(self.seed, self.entry, "mirror", layout)
            chunks = [mirror_a_sequence(rng, self.spec.shape, window, s, c) for s in seqs]
        else:
            chunks = [same_query_sequence(s, mirror_b_row(self.spec.shape, key_span(s, window), s.end, c,
                                                          self.scale)) for s in seqs]
        tags = [r.tag for s in chunks for r in s.rows(window)]
        return Checked(label, self._build(label, chunks, window), lambda: self._mirror_reference(chunks, window),
                       notes={"rows": tags})

    def _mirror_reference(self, chunks: list[PromptSeq], window: Window) -> Reference:
        """Mirror A's or B's exact output, and each row's largest score where the fused ABI writes it (from one
        batched score replay per chunk)."""
        a = self.spec.arithmetic
        rows = [r for s in chunks for r in (with_shared_scores(s, window, self.scale, a.score_grouping) if self.fused
                                            else s.rows(window))]
        ref = mirror_reference(rows, self.spec.shape, a)
        if self.fused:
            ref.expected.append(row_maxima(rows, a, self.scale))
        return ref

    def bench_calls(self, sizes: dict[str, tuple[int, ...]]) -> list:
        """A 512-row causal chunk ending at each context length (`rows` is decode's; a prompt chunk is its own)."""
        a = self.spec.arithmetic
        return [prompt_call(self.spec.shape, k, a.chunk, self.scale, a.prob_round == "bf16", fused=self.fused)
                for k in sizes["keys"]]


def with_shared_scores(seq: PromptSeq, window: Window, scale: float, grouping: str = "decode") -> list:
    """The chunk's rows as reference rows, each carrying its replayed scores (k-steps over the head dims of
    `grouping`) from one batched replay."""
    rows = seq.rows(window)
    spans = [(r.first - seq.key0, r.pos - seq.key0) for r in rows]
    for row, scores in zip(rows, shared_scores(seq.q, seq.k, spans, scale, grouping=grouping)):
        row.extra["scores"] = scores
    return rows


def _probe_band(pos: int, window: Window) -> int:
    """Rows of a probe's band ending at `pos`: up to BAND that all see the keys from the same first one (one row
    where a sliding window moves it)."""
    rows = min(BAND, pos + 1, pos - window.first(pos) + 1)
    return rows if window.first(pos - rows + 1) == window.first(pos) else 1
