"""Benchmark calls of the decode family: rows at the end of linear caches, each row its own slot."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.layout import MERGE_ARGS, PARTIALS_ARGS
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.peers import torch_sdpa
from kcontract.problem import BenchCall, KernelLaunch, OutputSpec

K_RMS, V_RMS, Q_RMS = 0.1, 1.0, 1.0  # realistic magnitudes: never time on zeros


def decode_call(shape: Shape, keys: int, rows: int, chunk: int, scale: float) -> BenchCall:
    """`rows` rows, each at the last position of its own linear cache of `keys` keys."""
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    n_part = -(-keys // chunk)
    cache = (rows, keys, hk, d)
    moved = rows * keys * hk * d * 2 * 2 + rows * hq * n_part * (d + 2) * 4 * 2 + rows * hq * d * 2 * 2
    return BenchCall(
        label=f"d{d} {hq}/{hk}", size={"rows": rows, "keys": keys},
        random_inputs={"q": ((rows, hq, d), Q_RMS), "k_cache": (cache, K_RMS), "v_cache": (cache, V_RMS)},
        fixed_inputs={"row_pos": np.full(rows, keys - 1, np.int32), "row_slot": np.arange(rows, dtype=np.int32)},
        outputs={"part_m": OutputSpec((rows, hq, n_part), "fp32"), "part_l": OutputSpec((rows, hq, n_part), "fp32"),
                 "part_o": OutputSpec((rows, hq, n_part, d), "fp32"), "out": OutputSpec((rows, hq, d), "bf16")},
        scalars={"win": np.int32(0), "ring": np.int32(keys), "n_part": np.int32(n_part), "scale": np.float32(scale),
                 "kv_heads": np.int32(hk)},
        launches=(KernelLaunch("partials", (n_part, hk, rows), PARTIALS_ARGS),
                  KernelLaunch("merge", (hq, rows, 1), MERGE_ARGS)),
        bytes=moved, flops=4 * rows * keys * hq * d,
        peer=torch_sdpa({"batch": rows, "q_heads": hq, "kv_heads": hk, "keys": keys, "head_dim": d,
                         "scale": float(scale)}))
