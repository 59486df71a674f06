"""A numpy double of an unfused attention, as torch's math backend computes it: fp32 q and k each times
fp32(sqrt(scale)), fp32 scores, a softmax over the row (each p divided by l), then P.V in fp32, then bf16."""

from __future__ import annotations

import numpy as np

from kcontract.numerics import bf16_from_f32_bits

from .decode import f32_of_bf16, group_heads, visible


def softmax_rows(s: np.ndarray, blocks: int = 1, p_round=None) -> np.ndarray:
    """Weights of fp32 scores [H, n]: exp(s - max) rounded once to fp32, l summed in `blocks` pieces, each weight
    over l (then `p_round`)."""
    e = np.exp((s - s.max(axis=1, keepdims=True)).astype(np.float64)).astype(np.float32)
    pieces = np.array_split(e, blocks, axis=1)
    total = sum(piece.sum(axis=1, keepdims=True, dtype=np.float32) for piece in pieces).astype(np.float32)
    p = e / total
    return p if p_round is None else p_round(p)


def attend(qb, keys, values, scale, blocks: int = 1, **softmax) -> np.ndarray:
    """One row: qb [Hq, D] and keys, values [n, Hq, D] as fp32; the fp32 result [Hq, D], l and P.V each summed
    in `blocks` pieces."""
    root = np.float32(np.sqrt(np.float64(scale)))
    q = qb * root
    k = keys * root
    s = np.einsum("hd,nhd->hn", q, k, dtype=np.float32)
    p = softmax_rows(s, blocks, **softmax)
    pieces = zip(np.array_split(p, blocks, axis=1), np.array_split(values, blocks, axis=0))
    return sum(np.einsum("hn,nhd->hd", pp, vv, dtype=np.float32) for pp, vv in pieces).astype(np.float32)


def decode_rows(q, k_cache, v_cache, row_pos, row_slot, out, win, ring, scale, **softmax) -> None:
    """Each row softmaxed over its visible keys, key head h // G; partials untouched."""
    heads = group_heads(q.shape[1], k_cache.shape[2])
    for b in range(len(row_pos)):
        lo, hi = visible(int(row_pos[b]), int(win))
        idx = np.arange(lo, hi + 1) % int(ring)
        keys = f32_of_bf16(k_cache[int(row_slot[b]), idx])[:, heads]
        values = f32_of_bf16(v_cache[int(row_slot[b]), idx])[:, heads]
        out[b] = bf16_from_f32_bits(attend(f32_of_bf16(q[b]), keys, values, scale, **softmax))


def window_decode(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part,
                  scale, kv_heads):
    """The double as declared: l in one fp32 sum, p kept in fp32."""
    decode_rows(q, k_cache, v_cache, row_pos, row_slot, out, win, ring, scale)


def bf16_probabilities(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part,
                       scale, kv_heads):
    """Control: p rounded to bf16 before P.V, as an unfused attention that keeps bf16 reductions does."""
    decode_rows(q, k_cache, v_cache, row_pos, row_slot, out, win, ring, scale,
                p_round=lambda p: f32_of_bf16(bf16_from_f32_bits(p)))


def sum_split_from_batch(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring,
                         n_part, scale, kv_heads):
    """Control: l and P.V summed in as many pieces as the batch has rows, a reduction shaped by the batch."""
    decode_rows(q, k_cache, v_cache, row_pos, row_slot, out, win, ring, scale, blocks=max(1, len(row_pos)))
