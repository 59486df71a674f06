"""The two Triton kernels of the split-K matmul peer (triton_matmul.py imports this module on first use).

Stage 1, grid (ceil(M / BLOCK_M), ceil(N / BLOCK_N), S): program (i, j, s) takes out's tile (i, j) over k tiles
[s per, min((s + 1) per, ceil(K / BLOCK_K))) of K, masked past M, N and K (zeros), acc = tl.dot(a, b^T, acc) in
fp32 tile after tile, and stores acc to out_ptr: out itself where S = 1 (rounded to its format), else the
workspace [S, M, N] at piece s.

Stage 2, grid (ceil(M N / BLOCK)): every output's pieces added in order s = 0 .. S - 1 in fp32, from the first,
then rounded to out's format (bf16 RN-even).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def split_partials(a_ptr, b_ptr, out_ptr, m, n, k, per, stride_a, stride_b,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    i = tl.program_id(0)
    j = tl.program_id(1)
    s = tl.program_id(2)
    rows = i * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = j * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k_tiles = tl.cdiv(k, BLOCK_K)
    first = tl.minimum(s * per, k_tiles)
    last = tl.minimum(first + per, k_tiles)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for t in range(first, last):
        ks = t * BLOCK_K + offs_k
        a = tl.load(a_ptr + rows[:, None].to(tl.int64) * stride_a + ks[None, :],
                    mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
        b = tl.load(b_ptr + cols[:, None].to(tl.int64) * stride_b + ks[None, :],
                    mask=(cols[:, None] < n) & (ks[None, :] < k), other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    at = s.to(tl.int64) * m * n + rows[:, None].to(tl.int64) * n + cols[None, :]
    tl.store(out_ptr + at, acc.to(out_ptr.dtype.element_ty), mask=(rows[:, None] < m) & (cols[None, :] < n))


@triton.jit
def split_merge(ws_ptr, out_ptr, size, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = at < size
    total = tl.load(ws_ptr + at, mask=live, other=0.0)
    for s in tl.static_range(1, SPLIT):  # in piece order
        total += tl.load(ws_ptr + s * size + at, mask=live, other=0.0)
    tl.store(out_ptr + at, total.to(out_ptr.dtype.element_ty), mask=live)
