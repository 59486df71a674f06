"""Benchmark calls of the prompt family: a chunk of rows ending at the end of a linear cache, causal."""

from __future__ import annotations

import numpy as np

from kcontract.bench.call import BenchCall
from kcontract.families.attention.bench import K_RMS, Q_RMS, V_RMS
from kcontract.families.attention.prompt_layout import BAND, MERGE_ARGS, partials_launch
from kcontract.families.attention.spec import Shape
from kcontract.problem import KernelLaunch, OutputSpec

CHUNK_ROWS = 512  # rows of a benchmarked prompt chunk


def prompt_call(shape: Shape, keys: int, chunk: int, scale: float, p_bf16: bool, rows: int = CHUNK_ROWS
                ) -> BenchCall:
    """`rows` consecutive rows whose last sits at the end of a linear cache of `keys` keys; useful flops count
    only the keys each row sees (4 flops per query head, dim and visible key); the label names P32 or bf16 P."""
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    rows = min(rows, keys)
    start = keys - rows
    n_part = -(-keys // chunk)
    visible = rows * start + rows * (rows + 1) // 2
    # tensor-core work as issued: each band of 16 rows, per query head, runs whole chunks 0 .. (its last row) //
    # chunk, scores (16 x chunk x d) and p times V once per part of p (bf16 P: 1; P32: hi, mid, lo)
    band_chunks = sum((min(start + b + BAND, keys) - 1) // chunk + 1 for b in range(0, rows, BAND))
    issued = band_chunks * hq * 2 * BAND * chunk * d * (1 + (1 if p_bf16 else 3))
    moved = keys * hk * d * 2 * 2 + rows * hq * n_part * (d + 2) * 4 * 2 + rows * hq * d * 2 * 2
    return BenchCall(
        label=f"prompt d{d} {hq}/{hk} {'bf16 P' if p_bf16 else 'P32'}", rows=rows, keys=keys,
        random_inputs={"q": ((rows, hq, d), Q_RMS), "k_cache": ((1, keys, hk, d), K_RMS),
                       "v_cache": ((1, keys, hk, d), V_RMS)},
        fixed_inputs={"seq_row0": np.array([0, rows], np.int32), "seq_pos0": np.array([start], np.int32),
                      "seq_slot": np.zeros(1, np.int32), "row_last": np.arange(start, keys, dtype=np.int32)},
        outputs={"part_m": OutputSpec((rows, hq, n_part), "fp32"), "part_l": OutputSpec((rows, hq, n_part), "fp32"),
                 "part_o": OutputSpec((rows, hq, n_part, d), "fp32"), "out": OutputSpec((rows, hq, d), "bf16")},
        scalars={"win": np.int32(0), "ring": np.int32(keys), "n_part": np.int32(n_part), "scale": np.float32(scale),
                 "kv_heads": np.int32(hk), "n_seq": np.int32(1)},
        launches=(partials_launch(n_part, hk, -(-rows // BAND)),
                  KernelLaunch("merge", (hq, rows, 1), MERGE_ARGS)),
        bytes=moved, flops=4 * hq * d * visible, mma_flops=issued,
        sdpa={"batch": 1, "q_heads": hq, "kv_heads": hk, "keys": keys, "head_dim": d, "scale": float(scale),
              "queries": rows, "causal": "lower_right"})
