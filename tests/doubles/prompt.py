"""A numpy fp32 prompt on the prompt ABI: each row's partials over its keys [first, last] in chunks at absolute
positions, then the merge, with the decode double's arithmetic; hooks for planted faults."""

from __future__ import annotations

import numpy as np

from kcontract.numerics import bf16_from_f32_bits

from .decode import CHUNK, chunk_count, merge_chunks, partial_chunks, rescale


def row_spans(seq_row0, seq_pos0, row_last, win: int):
    """(sequence, own position, first visible key, last visible key) of every row."""
    for s in range(len(seq_pos0)):
        for b in range(int(seq_row0[s]), int(seq_row0[s + 1])):
            pos = int(seq_pos0[s]) + b - int(seq_row0[s])
            yield b, s, pos, (max(0, pos - win + 1) if win > 0 else 0), int(row_last[b])


def prompt_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, part_m, part_l, part_o, out, *,
                win, ring, n_part, scale,
                last=lambda pos, given: given,  # (own position, row_last) -> the last key the row reads
                origin=lambda seq_pos0: 0,  # (the chunk's first position) -> where chunks start
                factor=rescale, **hooks):
    """Both kernels, row by row."""
    win, ring, n_part = int(win), int(ring), int(n_part)
    for b, s, pos, first, given in row_spans(seq_row0, seq_pos0, row_last, win):
        hi = last(pos, given)
        m, l, o = partial_chunks(q[b], k_cache, v_cache, hi, int(seq_slot[s]), win=win, ring=ring, scale=scale,
                                 span=lambda p, w, lo=first: (lo, p), origin=origin(int(seq_pos0[s])), **hooks)
        k = min(len(m), n_part)
        part_m[b, :, :k] = m[:k].T
        part_l[b, :, :k] = l[:k].T
        part_o[b, :, :k] = o[:k].transpose(1, 0, 2)
        out[b] = bf16_from_f32_bits(merge_chunks(m, l, o, b, factor=factor))


def window_prompt(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, part_m, part_l, part_o, out, *,
                  win, ring, n_part, scale, kv_heads, n_seq):
    """The correct double: C = 256, keys [first of the row's position, row_last], key head h // G."""
    hq, hk = q.shape[1], k_cache.shape[2]
    if hq % hk or hk != int(kv_heads) or len(seq_pos0) != int(n_seq):
        raise ValueError(f"q heads a multiple of key heads, kv_heads = {hk} and n_seq = {len(seq_pos0)}, given "
                         f"{hq}, {hk}, {kv_heads} and {n_seq}")
    need = max((chunk_count(first, hi, CHUNK) for _, _, _, first, hi in row_spans(seq_row0, seq_pos0, row_last,
                                                                                   int(win))), default=0)
    if need > int(n_part):
        raise ValueError(f"n_part {n_part} is below the {need} partials a row needs")
    prompt_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, part_m, part_l, part_o, out, win=win,
                ring=ring, n_part=n_part, scale=scale)
