"""The two Triton kernels of the split-K decode peer (triton_decode.py imports this module on first use).

Stage 1, grid (B, Hk, splits): a program takes row b's query heads of key head kh (G rows, padded to G_PAD >= 16
for tl.dot) and split s of the row's visible keys [first, pos]: the keys of chunk c = first // split_keys + s of
absolute positions [c * split_keys, (c + 1) * split_keys), restricted to [first, pos] (a row has
pos // split_keys - first // split_keys + 1 splits; later programs of the grid find none), read from the ring at
cache row p % ring in tiles of BLOCK_N keys from the split's first key. Scores
are tl.dot of bf16 q and k in fp32, times scale; an online softmax keeps the running max m, sum l and the fp32
accumulator acc (rescaled by exp(m_old - m_new) at each tile); p is rounded to bf16 for the p @ v tl.dot. The
program writes its split's m, l and acc (not divided by l) to the workspace; an empty split writes -inf, 0, 0.

Stage 2, grid (B, Hq): merges row b's splits of head h: M = max m_s, L = sum exp(m_s - M) l_s and
O = sum exp(m_s - M) acc_s, both added one split after another in split order (so the empty splits past a row's
keys, whose count follows the batch's longest row, add exact zeros at the end), writes O / L rounded to bf16
(round to nearest even).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def split_partials(q_ptr, k_ptr, v_ptr, pos_ptr, first_ptr, slot_ptr, m_ptr, l_ptr, o_ptr,
                   ring, split_keys, scale, hq, group,
                   stride_qb, stride_qh, stride_ks, stride_kr, stride_kh,
                   G_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    kh = tl.program_id(1)
    s = tl.program_id(2)
    n_splits = tl.num_programs(2)

    pos = tl.load(pos_ptr + b)
    first = tl.load(first_ptr + b)
    slot = tl.load(slot_ptr + b).to(tl.int64)
    chunk = first // split_keys + s  # splits at absolute positions
    lo = tl.maximum(chunk * split_keys, first)
    hi = tl.minimum((chunk + 1) * split_keys, pos + 1)  # lo >= hi: no key, the split writes -inf, 0, 0

    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    head_ok = offs_g < group
    heads = kh * group + offs_g  # query heads of key head kh
    q_at = b.to(tl.int64) * stride_qb + heads[:, None].to(tl.int64) * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_at, mask=head_ok[:, None], other=0.0)  # [G_PAD, D] bf16

    k_base = k_ptr + slot * stride_ks + kh * stride_kh  # v has k's strides (checked on the host)
    v_base = v_ptr + slot * stride_ks + kh * stride_kh
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, HEAD_DIM], tl.float32)
    for start in range(lo, hi, BLOCK_N):  # every tile holds at least one key: m_i is finite after the first
        p_abs = start + offs_n  # absolute key positions
        live = p_abs < hi
        cache_row = (p_abs % ring).to(tl.int64)
        kv_at = cache_row[:, None] * stride_kr + offs_d[None, :]
        k = tl.load(k_base + kv_at, mask=live[:, None], other=0.0)  # [BLOCK_N, D] bf16
        scores = tl.dot(q, tl.trans(k)) * scale  # [G_PAD, BLOCK_N] fp32
        scores = tl.where(live[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + kv_at, mask=live[:, None], other=0.0)  # [BLOCK_N, D] bf16
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new

    slot_at = (b.to(tl.int64) * hq + heads.to(tl.int64)) * n_splits + s  # [G_PAD]: workspace [B, Hq, splits]
    tl.store(m_ptr + slot_at, m_i, mask=head_ok)
    tl.store(l_ptr + slot_at, l_i, mask=head_ok)
    tl.store(o_ptr + slot_at[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=head_ok[:, None])


@triton.jit
def split_merge(m_ptr, l_ptr, o_ptr, out_ptr, n_splits, hq, stride_ob, stride_oh, HEAD_DIM: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    base = (b.to(tl.int64) * hq + h) * n_splits  # workspace [B, Hq, splits]
    offs_d = tl.arange(0, HEAD_DIM)
    m_max = tl.full([1], float("-inf"), tl.float32)
    for s in range(n_splits):  # finite at the end: split 0 holds the row's first key
        m_max = tl.maximum(m_max, tl.load(m_ptr + base + s))
    l_sum = tl.zeros([1], tl.float32)
    acc = tl.zeros([HEAD_DIM], tl.float32)
    for s in range(n_splits):  # in split order; an empty split weighs exp(-inf) = 0 and adds exact zeros
        weight = tl.exp(tl.load(m_ptr + base + s) - m_max)
        l_sum += weight * tl.load(l_ptr + base + s)
        acc += weight * tl.load(o_ptr + (base + s) * HEAD_DIM + offs_d)
    o = acc / l_sum
    out_at = b.to(tl.int64) * stride_ob + h * stride_oh + offs_d
    tl.store(out_ptr + out_at, o.to(tl.bfloat16))
