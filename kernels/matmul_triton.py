"""A batch-invariant matmul in Triton: out = a b^T of bf16 a [M, K] and b [N, K] (K contiguous), rounded to bf16.

A program takes a BLOCK_M x BLOCK_N tile of out: grid (ceil(N / BLOCK_N), ceil(M / BLOCK_M)). K is cut into SPLIT
pieces of whole BLOCK_K tiles by K and SPLIT alone: piece p takes tiles [p T, min((p + 1) T, KT)), KT = ceil(K /
BLOCK_K), T = ceil(KT / SPLIT). A piece's tl.dot chain (tensor-core k-steps, fp32 accumulator) starts from zero
and takes its tiles in increasing order, elements past K loaded as zeros; the pieces are added in order from the
first, ((P_0 + P_1) + P_2) ..., each addition fp32 RN; the sum is rounded to bf16 (RN-even). Nothing depends on M
or on where a row sits, so a row's bits do not follow its batch.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_tiles(a: "*bf16", b: "*bf16", out: "*bf16", m: "i32", n: "i32", k: "i32", BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr):
    """One tile of out over every piece of K, the pieces added in order."""
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, BLOCK_K)
    tiles = tl.cdiv(k, BLOCK_K)
    per = tl.cdiv(tiles, SPLIT)
    total = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for p in range(SPLIT):
        first = tl.minimum(p * per, tiles)
        last = tl.minimum(first + per, tiles)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for t in range(first, last):  # past M, N and K the loads are zeros
            ks = t * BLOCK_K + offs
            x = tl.load(a + rows[:, None].to(tl.int64) * k + ks[None, :],
                        mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
            w = tl.load(b + cols[:, None].to(tl.int64) * k + ks[None, :],
                        mask=(cols[:, None] < n) & (ks[None, :] < k), other=0.0)
            acc = tl.dot(x, tl.trans(w), acc)
        total = tl.where(p == 0, acc, total + acc)  # the first piece as it is, then each added in order
    tl.store(out + rows[:, None].to(tl.int64) * n + cols[None, :], total.to(tl.bfloat16),
             mask=(rows[:, None] < m) & (cols[None, :] < n))
