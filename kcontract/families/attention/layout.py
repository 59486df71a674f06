"""Lay rows into the decode ABI's buffers: the cache pool, positions, slots and workspace."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.window import Window, max_partials
from kcontract.numerics import poison_bits
from kcontract.problem import Assembled, KernelLaunch, OutputSpec, Problem

NEVER_WRITTEN = poison_bits("bf16")  # cache rows no position has reached yet hold NaN
PARTIALS_ARGS = ("q", "k_cache", "v_cache", "row_pos", "row_slot", "part_m", "part_l", "part_o", "win", "ring",
                 "n_part", "scale", "kv_heads")
MERGE_ARGS = ("part_m", "part_l", "part_o", "row_pos", "out", "win", "n_part", "kv_heads")
ABI = ("q", "k_cache", "v_cache", "row_pos", "row_slot", "part_m", "part_l", "part_o", "out", "win", "ring",
       "n_part", "scale", "kv_heads")


def build_problem(label: str, rows: list[RowData], shape: Shape, window: Window, chunk: int, scale: float,
                  out_fmt: str, slots: list[int] | None = None, n_part: int | None = None,
                  fill_outside: bool = True, n_slots: int | None = None) -> Problem:
    """A decode call over `rows`; row b reads cache slot slots[b] (default b) of n_slots (default enough).

    The cache pool is Assembled: host memory holds the rows' own keys (views), never the unwritten rows.
    """
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    batch = len(rows)
    slots = list(range(batch)) if slots is None else slots
    n_slots = max(slots) + 1 if n_slots is None else n_slots
    pool = (n_slots, window.ring, hk, d)
    k_blocks, v_blocks = [], []
    for row, slot in zip(rows, slots):  # first what lies before each window, then every window on top:
        window.check(row.pos)  # rows sharing a slot read one sequence, so their windows agree
        stored = window.stored(row.pos)
        before = stored[stored < row.first]
        if fill_outside and len(before):
            k_out, v_out = row.outside(before, hk, d)
            k_blocks.append((slot, cache_rows(window, before), k_out))
            v_blocks.append((slot, cache_rows(window, before), v_out))
    for row, slot in zip(rows, slots):
        at = cache_rows(window, np.arange(row.first, row.pos + 1))
        k_blocks.append((slot, at, row.k))
        v_blocks.append((slot, at, row.v))
    n_part = max_partials(window, chunk) if n_part is None else n_part
    return Problem(
        label=label,
        inputs={
            "q": np.stack([r.q for r in rows]),
            "k_cache": Assembled(pool, np.dtype(np.uint16), int(NEVER_WRITTEN), k_blocks),
            "v_cache": Assembled(pool, np.dtype(np.uint16), int(NEVER_WRITTEN), v_blocks),
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


def cache_rows(window: Window, positions: np.ndarray) -> slice | np.ndarray:
    """Cache rows of consecutive absolute positions: a slice where they do not wrap, else their indices."""
    at = window.slot_of(positions)
    if len(at) and at[-1] - at[0] == len(at) - 1:
        return slice(int(at[0]), int(at[-1]) + 1)
    return at
