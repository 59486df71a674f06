"""Lay prompt chunks into a prompt ABI's buffers (docs/families/attention.md 7): rows, sequences, cache, and the split
ABI's workspace or the fused ABI's row maxima."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.layout import NEVER_WRITTEN, cache_rows
from kcontract.families.attention.prompt_rows import PromptSeq
from kcontract.families.attention.rows import outside_bits
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.window import Window
from kcontract.problem import Assembled, KernelLaunch, OutputSpec, Problem

BAND = 16  # rows per band: a partials block takes one band of one sequence
TILE = 64  # a fused block's wgmma rows: TILE // G rows of one sequence, each with the G query heads of a key head
PARTIALS_ARGS = ("q", "k_cache", "v_cache", "seq_row0", "seq_pos0", "seq_slot", "row_last", "part_m", "part_l",
                 "part_o", "win", "ring", "n_part", "scale", "kv_heads", "n_seq")
MERGE_ARGS = ("part_m", "part_l", "part_o", "seq_row0", "seq_pos0", "row_last", "out", "win", "n_part", "kv_heads",
              "n_seq")
ABI = ("q", "k_cache", "v_cache", "seq_row0", "seq_pos0", "seq_slot", "row_last", "part_m", "part_l", "part_o",
       "out", "win", "ring", "n_part", "scale", "kv_heads", "n_seq")
ATTEND_ARGS = ("q", "k_cache", "v_cache", "seq_row0", "seq_pos0", "seq_slot", "row_last", "out", "row_m", "win",
               "ring", "scale", "kv_heads", "n_seq")  # the fused ABI: one launch, its arguments are the ABI
ABIS = {"split": ABI, "fused": ATTEND_ARGS}  # a prompt entry's `abi` -> a Python kernel's keyword arguments


def partials_needed(first: int, last: int, chunk: int) -> int:
    """Partials of a row whose keys are [first, last]: chunks at absolute positions."""
    return last // chunk - first // chunk + 1


def bands(seqs: list[PromptSeq]) -> int:
    """Partials blocks along z: each sequence's rows in bands of BAND."""
    return sum(-(-s.seq.rows // BAND) for s in seqs)


def tile_rows(group: int) -> int:
    """Rows of one sequence in a fused tile of `group` query heads per key head."""
    return TILE // group


def tiles(row_counts: list[int], group: int) -> int:
    """Fused blocks along x: each sequence's rows in tiles of tile_rows(group)."""
    return sum(-(-rows // tile_rows(group)) for rows in row_counts)


def fused_launch(row_counts: list[int], shape: Shape) -> KernelLaunch:
    """The fused launch on grid (tiles, key heads): a block takes a tile's rows for every query head of one key
    head."""
    group = shape.q_heads // shape.kv_heads
    return KernelLaunch("attend", (tiles(row_counts, group), shape.kv_heads, 1), ATTEND_ARGS)


def build_prompt_problem(label: str, seqs: list[PromptSeq], shape: Shape, window: Window, chunk: int,
                         scale: float, out_fmt: str, slots: list[int] | None = None, n_part: int | None = None,
                         n_slots: int | None = None, abi: str = "split") -> Problem:
    """A prompt call over `seqs` in the split or fused ABI; sequence s reads cache slot slots[s] (default s).

    Each slot holds what the cache holds when its chunk runs: every key up to the chunk's last row (the ring's
    last `ring` of them); keys no row sees are finite noise, rows past the chunk's end are never written. n_part
    is the split ABI's only.
    """
    hk, d = shape.kv_heads, shape.head_dim
    slots = list(range(len(seqs))) if slots is None else slots
    n_slots = max(slots) + 1 if n_slots is None else n_slots
    pool = (n_slots, window.ring, hk, d)
    k_blocks, v_blocks = [], []
    firsts, lasts = [], []
    for s, slot in zip(seqs, slots):
        end = s.seq.end
        stored = np.arange(max(0, end - window.ring + 1), end + 1)
        before = stored[stored < s.key0]
        if len(before):
            k_out, v_out = outside_bits(s.filler_seed, s.filler_value, len(before), hk, d)
            k_blocks.append((slot, cache_rows(window, before), k_out))
            v_blocks.append((slot, cache_rows(window, before), v_out))
        at = np.arange(max(s.key0, end - window.ring + 1), end + 1)
        k_blocks.append((slot, cache_rows(window, at), s.k[at[0] - s.key0:]))
        v_blocks.append((slot, cache_rows(window, at), s.v[at[0] - s.key0:]))
        for pos in s.positions():
            firsts.append(window.first(int(pos)))
            lasts.append(s.seq.last_visible(int(pos)))
    rows = len(lasts)
    row0 = np.concatenate([[0], np.cumsum([s.seq.rows for s in seqs])]).astype(np.int32)
    scalars = {"win": np.int32(window.win), "ring": np.int32(window.ring), "scale": np.float32(scale),
               "kv_heads": np.int32(hk), "n_seq": np.int32(len(seqs))}
    out = OutputSpec((rows, shape.q_heads, d), out_fmt)
    if abi == "fused":
        outputs = {"out": out, "row_m": OutputSpec((rows, shape.q_heads), "fp32")}
        launches = (fused_launch([s.seq.rows for s in seqs], shape),)
    else:
        need = max(partials_needed(f, l, chunk) for f, l in zip(firsts, lasts))
        n_part = need if n_part is None else n_part
        outputs = {"part_m": OutputSpec((rows, shape.q_heads, n_part), "fp32"),
                   "part_l": OutputSpec((rows, shape.q_heads, n_part), "fp32"),
                   "part_o": OutputSpec((rows, shape.q_heads, n_part, d), "fp32"), "out": out}
        scalars["n_part"] = np.int32(n_part)
        launches = (partials_launch(n_part, hk, bands(seqs)),
                    KernelLaunch("merge", (shape.q_heads, rows, 1), MERGE_ARGS))
    return Problem(
        label=label,
        inputs={
            "q": np.concatenate([s.q for s in seqs]),
            "k_cache": Assembled(pool, np.dtype(np.uint16), int(NEVER_WRITTEN), k_blocks),
            "v_cache": Assembled(pool, np.dtype(np.uint16), int(NEVER_WRITTEN), v_blocks),
            "seq_row0": row0,
            "seq_pos0": np.array([s.seq.start for s in seqs], dtype=np.int32),
            "seq_slot": np.array(slots, dtype=np.int32),
            "row_last": np.array(lasts, dtype=np.int32),
        },
        outputs=outputs,
        scalars=scalars,
        launches=launches,
    )


def partials_launch(n_part: int, hk: int, n_bands: int) -> KernelLaunch:
    """The partials launch on grid (bands, key heads, n_part): bands fastest, so the blocks that read one chunk's K
    and V run together."""
    return KernelLaunch("partials", (n_bands, hk, n_part), PARTIALS_ARGS)
