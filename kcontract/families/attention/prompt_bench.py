"""Benchmark calls of the prompt family: a chunk of rows ending at the end of a linear cache, causal."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.bench import K_RMS, Q_RMS, V_RMS
from kcontract.families.attention.prompt_layout import (BAND, MERGE_ARGS, TILE, fused_launch, partials_launch,
                                                       tile_rows)
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.peers import torch_sdpa
from kcontract.problem import BenchCall, KernelLaunch, OutputSpec

CHUNK_ROWS = 512  # rows of a benchmarked prompt chunk


def prompt_call(shape: Shape, keys: int, chunk: int, scale: float, p_bf16: bool, rows: int = CHUNK_ROWS,
                fused: bool = False) -> BenchCall:
    """`rows` consecutive rows whose last sits at the end of a linear cache of `keys` keys; useful flops count
    only the keys each row sees (4 flops per query head, dim and visible key); the label names P32 or bf16 P, and
    the fused ABI (one launch, no partials)."""
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    rows = min(rows, keys)
    start = keys - rows
    n_part = -(-keys // chunk)
    visible = rows * start + rows * (rows + 1) // 2
    # tensor-core work as issued: each block of `m` rows (a band of 16 per query head, or a fused tile of
    # TILE // G rows for the G query heads of a key head: TILE wgmma rows) runs whole chunks 0 .. (its last row)
    # // chunk, scores (m x chunk x d per head) and p times V once per part of p (bf16 P: 1; P32: hi, mid, lo)
    m = tile_rows(hq // hk) if fused else BAND
    block_chunks = sum((min(start + b + m, keys) - 1) // chunk + 1 for b in range(0, rows, m))
    wgmma_rows = hk * TILE if fused else hq * m
    issued = block_chunks * wgmma_rows * 2 * chunk * d * (1 + (1 if p_bf16 else 3))
    inputs = keys * hk * d * 2 * 2
    ends = rows * hq * d * 2 * 2
    common = {"label": f"prompt d{d} {hq}/{hk} {'bf16 P' if p_bf16 else 'P32'}{' fused' if fused else ''}",
              "size": {"rows": rows, "keys": keys}, "bound": "compute",
              "random_inputs": {"q": ((rows, hq, d), Q_RMS), "k_cache": ((1, keys, hk, d), K_RMS),
                                "v_cache": ((1, keys, hk, d), V_RMS)},
              "fixed_inputs": {"seq_row0": np.array([0, rows], np.int32), "seq_pos0": np.array([start], np.int32),
                               "seq_slot": np.zeros(1, np.int32),
                               "row_last": np.arange(start, keys, dtype=np.int32)},
              "flops": 4 * hq * d * visible, "mma_flops": issued,
              "peer": torch_sdpa({"batch": 1, "q_heads": hq, "kv_heads": hk, "keys": keys, "head_dim": d,
                                  "scale": float(scale), "queries": rows, "causal": "lower_right"})}
    scalars = {"win": np.int32(0), "ring": np.int32(keys), "scale": np.float32(scale), "kv_heads": np.int32(hk),
               "n_seq": np.int32(1)}
    if fused:
        return BenchCall(
            outputs={"out": OutputSpec((rows, hq, d), "bf16"), "row_m": OutputSpec((rows, hq), "fp32")},
            scalars=scalars, launches=(fused_launch([rows], shape),),
            bytes=inputs + ends + rows * hq * 4, **common)
    return BenchCall(
        outputs={"part_m": OutputSpec((rows, hq, n_part), "fp32"), "part_l": OutputSpec((rows, hq, n_part), "fp32"),
                 "part_o": OutputSpec((rows, hq, n_part, d), "fp32"), "out": OutputSpec((rows, hq, d), "bf16")},
        scalars=scalars | {"n_part": np.int32(n_part)},
        launches=(partials_launch(n_part, hk, -(-rows // BAND)),
                  KernelLaunch("merge", (hq, rows, 1), MERGE_ARGS)),
        bytes=inputs + rows * hq * n_part * (d + 2) * 4 * 2 + ends, **common)
