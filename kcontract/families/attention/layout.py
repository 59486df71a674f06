"""Lay rows into the decode ABI's buffers: the cache pool, positions, slots and workspace."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.window import Window, max_partials
from kcontract.numerics import poison_bits
from kcontract.problem import KernelLaunch, OutputSpec, Problem

NEVER_WRITTEN = poison_bits("bf16")  # cache rows no position has reached yet hold NaN
PARTIALS_ARGS = ("q", "k_cache", "v_cache", "row_pos", "row_slot", "part_m", "part_l", "part_o", "win", "ring",
                 "n_part", "scale", "kv_heads")
MERGE_ARGS = ("part_m", "part_l", "part_o", "row_pos", "out", "win", "n_part", "kv_heads")
ABI = ("q", "k_cache", "v_cache", "row_pos", "row_slot", "part_m", "part_l", "part_o", "out", "win", "ring",
       "n_part", "scale", "kv_heads")


def build_problem(label: str, rows: list[RowData], shape: Shape, window: Window, chunk: int, scale: float,
                  out_fmt: str, slots: list[int] | None = None, n_part: int | None = None,
                  fill_outside: bool = True) -> Problem:
    """A decode call over `rows`; row b reads cache slot slots[b] (default b)."""
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    batch = len(rows)
    slots = list(range(batch)) if slots is None else slots
    n_slots = max(slots) + 1
    k_cache = np.full((n_slots, window.ring, hk, d), NEVER_WRITTEN, dtype=np.uint16)
    v_cache = np.full_like(k_cache, NEVER_WRITTEN)
    for row, slot in zip(rows, slots):  # first what lies before each window, then every window on top:
        window.check(row.pos)  # rows sharing a slot read one sequence, so their windows agree
        stored = window.stored(row.pos)
        before = stored[stored < row.first]
        if fill_outside and len(before):
            k_out, v_out = row.outside(before, hk, d)
            k_cache[slot, window.slot_of(before)] = k_out
            v_cache[slot, window.slot_of(before)] = v_out
    for row, slot in zip(rows, slots):
        visible = np.arange(row.first, row.pos + 1)
        k_cache[slot, window.slot_of(visible)] = row.k
        v_cache[slot, window.slot_of(visible)] = row.v
    n_part = max_partials(window, chunk) if n_part is None else n_part
    return Problem(
        label=label,
        inputs={
            "q": np.stack([r.q for r in rows]),
            "k_cache": k_cache,
            "v_cache": v_cache,
            "row_pos": np.array([r.pos for r in rows], dtype=np.int32),
            "row_slot": np.array(slots, dtype=np.int32),
        },
        outputs={
            "part_m": OutputSpec((batch, hq, n_part), "fp32"),
            "part_l": OutputSpec((batch, hq, n_part), "fp32"),
            "part_o": OutputSpec((batch, hq, n_part, d), "fp32"),
            "out": OutputSpec((batch, hq, d), out_fmt),
        },
        scalars={"win": np.int32(window.win), "ring": np.int32(window.ring), "n_part": np.int32(n_part),
                 "scale": np.float32(scale), "kv_heads": np.int32(hk)},
        launches=(KernelLaunch("partials", (n_part, hk, batch), PARTIALS_ARGS),
                  KernelLaunch("merge", (hq, batch, 1), MERGE_ARGS)),
    )
