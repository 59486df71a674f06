"""Gate 2's variant runs of a decode call: the core's batching variants, and the cache declared longer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from kcontract.families.attention.rows import RowData
from kcontract.families.attention.window import Window, max_partials
from kcontract.family.batching import batch_variants
from kcontract.problem import Problem, Variant

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


def plan_variants(plan: VariantPlan, base_problem: Problem) -> Iterator[Variant]:
    """Every variant run of the base call, built one at a time as the gate asks for it: the core's batching
    variants (a batch's mates share the filler sequence's cache slot; a permuted call rolls the slots), then the
    cache declared longer and more partial slots than the rows need."""
    rows, window = plan.rows, plan.window

    def build(kind: str, label: str, members: list[int]) -> Problem:
        batch = [rows[m] if m >= 0 else plan.fillers[-1 - m] for m in members]
        slots = {"solo": None, "batch": [0 if m >= 0 else 1 for m in members], "other": [0] * len(members),
                 "permuted": list(np.roll(np.arange(len(members)), 1)), "rerun": plan.slots}[kind]
        return plan.build(label, batch, slots=slots)

    yield from batch_variants(len(rows), len(plan.fillers), build)
    factor = longer_factor(base_problem)
    longer = Window(win=window.win, ring=window.ring * factor)
    label = f"cache_x{factor}"
    same = {b: b for b in range(len(rows))}
    yield Variant(label, plan.build(label, rows, window=longer, slots=plan.slots), same)
    n_part = 2 * max_partials(window, plan.chunk) + 3
    yield Variant("n_part_larger", plan.build("n_part_larger", rows, n_part=n_part, slots=plan.slots), same)


def longer_factor(problem: Problem) -> int:
    """The largest factor up to LONGER_CACHE whose re-laid cache pool fits the budget, and at least 2."""
    return factor_for(problem.inputs["k_cache"].nbytes + problem.inputs["v_cache"].nbytes)


def factor_for(pool_bytes: int) -> int:
    """The cache-length factor of gate 2's longer-cache variant for a pool of this many bytes."""
    return max(2, min(LONGER_CACHE, LONGER_CACHE_BYTES // max(pool_bytes, 1)))
