"""Gate 2's prompt variants: the chunk split and resumed, each sequence alone or beside others, started
earlier, re-laid, rerun and run beside another call; every base row keeps its bits."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

import numpy as np

from kcontract.families.attention.prompt_rows import EARLIER, PromptSeq
from kcontract.families.attention.prompt_spec import Sequence
from kcontract.families.attention.variants import factor_for
from kcontract.families.attention.window import Window
from kcontract.numerics import rn_bits
from kcontract.problem import Problem, Variant



@dataclass
class PromptPlan:
    """The base call's sequences, a filler sequence, the layout and how to build a call."""

    seqs: list[PromptSeq]
    filler: PromptSeq
    window: Window
    build: Callable[..., Problem]  # build(label, seqs, window=..., slots=..., n_part=...); n_part: split ABI only


def split_points(seq: Sequence) -> list[int]:
    """Where a chunk may be cut (no image span across the cut): the first row, the middle, around each span,
    the last row; at most six."""
    wanted = {1, seq.rows // 2, seq.rows - 1}
    for first, last in seq.images:
        wanted |= {first - seq.start, last + 1 - seq.start}
    inside = [(first - seq.start, last - seq.start) for first, last in seq.images]
    ok = sorted(k for k in wanted if 0 < k < seq.rows and not any(a < k <= b for a, b in inside))
    return ok if len(ok) <= 6 else [ok[int(i)] for i in np.linspace(0, len(ok) - 1, 6)]


def plan_prompt_variants(plan: PromptPlan, base: Problem) -> Iterator[Variant]:
    """Every variant call of the base call, built as the gate asks for it."""
    seqs, build = plan.seqs, plan.build
    offset = np.concatenate([[0], np.cumsum([s.seq.rows for s in seqs])])
    for s, seq in enumerate(seqs):
        rows = seq.seq.rows
        for k in split_points(seq.seq):
            head, tail = seq.part(0, k), seq.part(k, rows - k)
            label = f"seq{s}_split{k}"
            yield Variant(f"{label}_head", build(f"{label}_head", [head]), {offset[s] + i: i for i in range(k)})
            yield Variant(f"{label}_resumed", build(f"{label}_resumed", [tail]),
                          {offset[s] + k + i: i for i in range(rows - k)})
        if len(seqs) > 1:
            yield Variant(f"seq{s}_alone", build(f"seq{s}_alone", [seq]), {offset[s] + i: i for i in range(rows)})
        earlier = _earlier(seq, plan.window)
        if earlier is not None:
            e = earlier.seq.rows - rows
            yield Variant(f"seq{s}_earlier{e}", build(f"seq{s}_earlier{e}", [earlier]),
                          {offset[s] + i: e + i for i in range(rows)})
    total = int(offset[-1])
    same = {b: b for b in range(total)}
    f = plan.filler.seq.rows
    yield Variant("filler_first", build("filler_first", [plan.filler] + seqs), {b: f + b for b in range(total)})
    yield Variant("filler_last", build("filler_last", seqs + [plan.filler]), same)
    order = list(reversed(range(len(seqs))))
    moved = np.concatenate([[0], np.cumsum([seqs[i].seq.rows for i in order])])
    where = {b: int(moved[order.index(s)] + b - offset[s]) for s in range(len(seqs))
             for b in range(int(offset[s]), int(offset[s + 1]))}
    slots = [(i + 1) % len(seqs) for i in range(len(seqs))] if len(seqs) > 1 else [1]
    yield Variant("permuted", build("permuted", [seqs[i] for i in order], slots=slots), where)
    factor = factor_for(base.inputs["k_cache"].nbytes + base.inputs["v_cache"].nbytes)
    longer = Window(win=plan.window.win, ring=plan.window.ring * factor)
    yield Variant(f"cache_x{factor}", build(f"cache_x{factor}", seqs, window=longer), same)
    if "n_part" in base.scalars:  # the split ABI's workspace; the fused ABI has none
        n_part = 2 * int(base.scalars["n_part"]) + 3
        yield Variant("n_part_larger", build("n_part_larger", seqs, n_part=n_part), same)
    yield Variant("rerun", build("rerun", seqs), same)
    other = build("concurrent_other", [plan.filler])
    yield Variant("concurrent", build("concurrent", seqs), same, concurrent_with=other)


def _earlier(seq: PromptSeq, window: Window) -> PromptSeq | None:
    """The chunk started up to EARLIER rows sooner (new rows with queries of their own, the image spans elsewhere in
    the call), where its keys reach back that far."""
    e = min(EARLIER, seq.seq.start)
    while e and window.first(seq.seq.start - e) < seq.key0:
        e -= 1
    if e == 0:
        return None
    start = seq.seq.start - e
    rng = np.random.default_rng([seq.filler_seed, e])
    extra = rn_bits(rng.standard_normal((e,) + seq.q.shape[1:]), "bf16")
    moved = Sequence(start=start, rows=seq.seq.rows + e, images=seq.seq.images)
    return replace(seq, seq=moved, q=np.concatenate([extra, seq.q]))
