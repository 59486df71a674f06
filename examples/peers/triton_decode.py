"""A Triton split-K decode kernel ("flash-decoding") as decode peers on the attention.decode ABI.

Stage 1, grid (B, Hk, splits), splits each row's visible keys [first, pos] into pieces at absolute positions
[c * split_keys, (c + 1) * split_keys) (chunks, as this repository's decode has them), reads them straight from
the ring cache (cache row p % ring) and writes each piece's online-softmax partials (m, l, acc) to a workspace;
stage 2, grid (B, Hq), merges a row's pieces with the usual max-rescale and writes bf16 (see _triton_kernels.py
for the arithmetic: fp32 tl.dot scores, tl.exp, p rounded to bf16 for p @ v, fp32 accumulation, RN-even output).

Two peers differ only in how split_keys is chosen:
- split_fixed: 1,024 keys per split (absolute positions), so a row's split boundaries depend on its own keys
  alone;
- split_by_batch: the number of splits from the batch size and the SM count, as serving stacks' heuristics do
  (more splits for small batches, to fill the GPU): a row's boundaries, and so its bits, follow the batch it
  sits in. This is the canonical batch-variance fault; the contract should catch it at gate 2.

Head dims 64, 128 and 256 (the whole head in one tile), up to 16 query heads per key head. The workspace lives in
torch's allocator on CuPy's stream; part_m, part_l and part_o of the ABI are left untouched (`partials: hidden`).
"""

from __future__ import annotations

import importlib

if __package__:  # imported as examples.peers.triton_decode
    from . import _common as common
else:  # imported as triton_decode, from the contract's folder
    import _common as common

FIXED_SPLIT_KEYS = 1024  # split_fixed: keys per split
MAX_SPLITS = 32  # split_by_batch: at most this many splits of a row
BLOCK_N = {64: 64, 128: 64, 256: 32}  # keys per tile, by head dim
NUM_WARPS = 4


def split_fixed(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
                kv_heads):
    """Split-K decode with 1,024 keys per split at absolute positions (boundaries independent of the batch)."""
    common.run_peer(lambda torch, batch: decode(torch, batch, FIXED_SPLIT_KEYS), q, k_cache, v_cache, row_pos,
                    row_slot, out, win=win, ring=ring, scale=scale, kv_heads=kv_heads)


def split_by_batch(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part,
                   scale, kv_heads):
    """Split-K decode with the split count chosen from the batch size and SM count (batch-dependent)."""
    common.run_peer(lambda torch, batch: decode(torch, batch, keys_by_batch(torch, batch)), q, k_cache, v_cache,
                    row_pos, row_slot, out, win=win, ring=ring, scale=scale, kv_heads=kv_heads)


def keys_by_batch(torch, batch) -> int:
    """Keys per split: enough programs (B x Hk x splits) to cover the SMs, at most MAX_SPLITS splits, whole tiles
    of the longest row."""
    sms = int(torch.cuda.get_device_properties(batch.q.device).multi_processor_count)
    splits = max(1, min(MAX_SPLITS, -(-sms // (batch.rows * batch.hk))))
    tile = BLOCK_N.get(batch.head_dim, 64)
    per_split = -(-batch.longest // splits)
    return -(-per_split // tile) * tile


def kernels():
    """The Triton kernels' module, imported on first use (Triton loads only where a peer runs)."""
    name = f"{__package__}._triton_kernels" if __package__ else "_triton_kernels"
    return importlib.import_module(name)


def power_of_two(n: int) -> int:
    """The least power of two >= n."""
    return 1 << max(0, int(n) - 1).bit_length()


def decode(torch, batch, split_keys: int):
    """[B, Hq, D] bf16: stage 1 over (B, Hk, splits) into an fp32 workspace, then stage 2 over (B, Hq)."""
    if batch.head_dim not in BLOCK_N:
        raise ValueError(f"head dim {batch.head_dim} unsupported: one of {sorted(BLOCK_N)}")
    if batch.group > 16:
        raise ValueError(f"{batch.group} query heads per key head: at most 16")
    if split_keys < 1:
        raise ValueError(f"split_keys {split_keys} must be positive")
    k_cache, v_cache = batch.k_cache, batch.v_cache
    if tuple(k_cache.stride()) != tuple(v_cache.stride()) or k_cache.stride(3) != 1 or batch.q.stride(2) != 1:
        raise ValueError("q, k_cache and v_cache: contiguous head dims and one layout for k and v expected")
    ops = kernels()
    rows, hq, hk, dim = batch.rows, batch.hq, batch.hk, batch.head_dim
    n_splits = int((batch.pos_host // split_keys - batch.first_host // split_keys).max()) + 1  # most of any row
    device = batch.q.device
    part_m = torch.empty((rows, hq, n_splits), device=device, dtype=torch.float32)
    part_l = torch.empty((rows, hq, n_splits), device=device, dtype=torch.float32)
    part_o = torch.empty((rows, hq, n_splits, dim), device=device, dtype=torch.float32)
    result = torch.empty((rows, hq, dim), device=device, dtype=torch.bfloat16)
    ops.split_partials[(rows, hk, n_splits)](
        batch.q, k_cache, v_cache, batch.row_pos, batch.first, batch.row_slot, part_m, part_l, part_o,
        batch.ring, int(split_keys), batch.scale, hq, batch.group,
        batch.q.stride(0), batch.q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        G_PAD=max(16, power_of_two(batch.group)), HEAD_DIM=dim, BLOCK_N=BLOCK_N[dim], num_warps=NUM_WARPS)
    ops.split_merge[(rows, hq)](
        part_m, part_l, part_o, result, n_splits, hq, result.stride(0), result.stride(1),
        HEAD_DIM=dim, num_warps=NUM_WARPS)
    return result
