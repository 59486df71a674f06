"""Gate 2's variant runs: the same rows solo, inside batches at every slot, permuted, re-laid, rerun."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from kcontract.families.attention.rows import RowData
from kcontract.families.attention.window import Window, max_partials
from kcontract.problem import Problem, Variant

BATCH_SIZES = (2, 7, 16, 64)
LONGER_CACHE = 16  # the cache is declared this many times longer, same content
LONGER_CACHE_BYTES = 4 << 30  # the re-laid pool's device bytes: the factor shrinks to fit, but never below 2


@dataclass
class VariantPlan:
    """What the family hands the planner: the base rows, fillers, and how to build a call."""

    rows: list[RowData]
    fillers: list[RowData]  # other rows at other positions, all reading one sequence in one cache slot
    window: Window
    chunk: int
    build: Callable[..., Problem]  # build(label, rows, window=..., slots=..., n_part=...)
    slots: list[int] | None = None  # the base call's cache slot per row (rows of one stream share one)


def slot_index(where: str, size: int) -> int:
    """Batch index for 'first', 'middle' or 'last'."""
    return {"first": 0, "middle": size // 2, "last": size - 1}[where]


def plan_variants(plan: VariantPlan, base_problem: Problem) -> Iterator[Variant]:
    """Every variant run of the base call, built one at a time as the gate asks for it."""
    rows, fillers, window = plan.rows, plan.fillers, plan.window
    for b, row in enumerate(rows):
        yield Variant(f"solo_row{b}", plan.build(f"solo_row{b}", [row]), {b: 0})
    target = 0
    for size in BATCH_SIZES:
        for where in ("first", "middle", "last"):
            at = slot_index(where, size)
            mates = [fillers[i % len(fillers)] for i in range(size - 1)]
            batch = mates[:at] + [rows[target]] + mates[at:]
            slots = [1] * at + [0] + [1] * (size - 1 - at)  # the mates share the filler sequence's slot
            label = f"batch{size}_{where}_row{target}"
            yield Variant(label, plan.build(label, batch, slots=slots), {target: at})
            target = (target + 1) % len(rows)
    order = list(reversed(range(len(rows))))
    slots = list(np.roll(np.arange(len(rows)), 1))
    yield Variant("permuted", plan.build("permuted", [rows[i] for i in order], slots=slots),
                  {b: order.index(b) for b in range(len(rows))})
    factor = longer_factor(base_problem)
    longer = Window(win=window.win, ring=window.ring * factor)
    label = f"cache_x{factor}"
    same = {b: b for b in range(len(rows))}
    yield Variant(label, plan.build(label, rows, window=longer, slots=plan.slots), same)
    n_part = 2 * max_partials(window, plan.chunk) + 3
    yield Variant("n_part_larger", plan.build("n_part_larger", rows, n_part=n_part, slots=plan.slots), same)
    yield Variant("rerun", plan.build("rerun", rows, slots=plan.slots), same)
    mates = fillers[: max(1, min(7, len(fillers)))]
    other = plan.build("concurrent_other", mates, slots=[0] * len(mates))
    yield Variant("concurrent", plan.build("concurrent", rows, slots=plan.slots), same, concurrent_with=other)


def longer_factor(problem: Problem) -> int:
    """The largest factor up to LONGER_CACHE whose re-laid cache pool fits the budget, and at least 2."""
    return factor_for(problem.inputs["k_cache"].nbytes + problem.inputs["v_cache"].nbytes)


def factor_for(pool_bytes: int) -> int:
    """The cache-length factor of gate 2's longer-cache variant for a pool of this many bytes."""
    return max(2, min(LONGER_CACHE, LONGER_CACHE_BYTES // max(pool_bytes, 1)))
