"""RMSNorm of token rows in Triton, one program per row: y = (h * rsqrt(S / hidden + eps)) * w, rounded to bf16.

S = sum h^2 in fp32: lane j of the program's BLOCK-wide accumulator adds the squares (one fma each) of elements
j, j + BLOCK, j + 2 BLOCK, ... in order, then tl.sum reduces the BLOCK lanes by Triton's fixed tree for BLOCK and
num_warps. The order depends on the hidden size, BLOCK and num_warps only, never on the number of rows, so a row's
bits do not follow the batch. Rounding points: each fma of the sum, the tree's adds, hidden as fp32 (exact below
2^24), S / hidden (IEEE, div_rn), + eps, rsqrt (rsqrt.approx), h * inv, * w, bf16 (RN-even).
"""

import triton
import triton.language as tl


@triton.jit
def rms_norm_rows(x: "*bf16", w: "*bf16", out: "*bf16", hidden: "i32", eps: "fp32", BLOCK: tl.constexpr):
    """One row per program: its sum of squares, then its scaled row."""
    row = tl.program_id(0).to(tl.int64) * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        h = tl.load(x + row + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        acc += h * h
    inv = tl.rsqrt(tl.math.div_rn(tl.sum(acc, axis=0), hidden.to(tl.float32)) + eps)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        h = tl.load(x + row + offs, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(w + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out + row + offs, (h * inv * g).to(tl.bfloat16), mask=mask)
