"""Rows summed in another key order inside each chunk: what a kernel that walks a chunk's keys out of its declared
order computes, where every p is exactly 1 (q = 0) and only the order of the values matters."""

from __future__ import annotations

import numpy as np


def reversed_in_chunks(v: np.ndarray, first: int, pos: int, chunk: int) -> np.ndarray:
    """v [n, ...] of keys first..pos with each chunk's keys (at absolute positions) in reverse order."""
    out = v.copy()
    for c0 in range((first // chunk) * chunk, pos + 1, chunk):
        lo, hi = max(c0, first) - first, min(c0 + chunk - 1, pos) - first
        out[lo:hi + 1] = v[lo:hi + 1][::-1]
    return out


FUSED_CONTRACT = """version: 1
seed: 1
entries:
  - name: fused
    family: attention.prompt
    kernel: {python: "tests.doubles.prompt_fused:window_prompt_fused_p32"}
    abi: fused
    shape: {head_dim: 64, q_heads: 2, kv_heads: 1}
    arithmetic: {chunk: 64, score: mma_bf16, score_order: replay_natural, sum_order: online_mma, pv: mma_bf16, exp: expf, prob_round: none, div: ieee, out: bf16, partials: hidden}
    cases:
      - name: linear_400
        cache: {kind: linear, length: 400}
        sequences:
          - {start: 300, rows: 16}
controls:
  - {name: keys_backwards_in_chunk, entry: fused, gate: 1, fault: "each chunk's k-steps from the last one back",
     kernel: {python: "tests.doubles.controls:fused_steps_backwards"}}
"""
