"""torch's attention backends as decode peers on the attention.decode ABI (device kernels: CuPy arrays in).

Each peer makes ONE call over the whole batch of decode rows, as a serving stack does, so any dependence of a
row's bits on the batch shows at gate 2:

- math, efficient, cudnn: torch.nn.functional.scaled_dot_product_attention under sdpa_kernel(SDPBackend.X) on
  q [B, Hq, 1, D] and k, v [B, Hk, L, D] bf16, L the longest row's key count, shorter rows padded with zero keys
  that a boolean attn_mask [B, 1, 1, L] (True: attend) masks out; enable_gqa=True where Hq != Hk (if the backend
  refuses that, the key heads are repeat_interleave'd and the call made again: PATHS says which ran).
- flash: torch's flash backend takes no mask, so the varlen op torch.ops.aten._flash_attention_forward runs on
  q [B, Hq, D] (one query per row) and the rows' keys packed [total, Hk, D] with int32 cumulative offsets. Where
  torch has no such op, rows of equal key counts run together under sdpa_kernel(FLASH_ATTENTION), unmasked.
- flex: torch.nn.attention.flex_attention.flex_attention compiled once per process with torch.compile (flex
  without compile runs an unfused path that materialises the scores: not what a serving stack runs), with a
  block mask from a mask_mod over the rows' key counts (create_block_mask with B rows, keys padded to a
  multiple of 128) and enable_gqa=True.

A backend torch refuses (cuDNN at some head dim or mask, flash on an old GPU) raises RuntimeError in one line,
which kcontract reports as the kernel's error. The peers leave part_m, part_l and part_o untouched (contract:
`partials: hidden`).
"""

from __future__ import annotations

import warnings

if __package__:  # imported as examples.peers.sdpa
    from . import _common as common
else:  # imported as sdpa, from the contract's folder
    import _common as common

BACKENDS = {"math": "MATH", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
            "flash": "FLASH_ATTENTION"}
FLASH_ARGS = ("query", "key", "value", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p", "is_causal",
              "return_debug_mask")
FLEX_BLOCK = 128  # flex keys are padded to whole blocks of this many
CUDNN_BLOCK = 64  # cuDNN's keys likewise (it refuses some short key counts)
PATHS: dict[str, str] = {}  # peer -> how its last call ran (the self-test prints it)
_COMPILED: dict[str, object] = {}  # the compiled flex_attention, made once per process


def math(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
         kv_heads):
    """SDPA's math backend (the composite reference: matmul, softmax, matmul) on the padded, masked batch."""
    common.run_peer(lambda torch, batch: masked_sdpa(torch, batch, "math"), q, k_cache, v_cache, row_pos,
                    row_slot, out, win=win, ring=ring, scale=scale, kv_heads=kv_heads)


def efficient(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
              kv_heads):
    """SDPA's memory-efficient backend (xformers' cutlass kernel) on the padded, masked batch."""
    common.run_peer(lambda torch, batch: masked_sdpa(torch, batch, "efficient"), q, k_cache, v_cache, row_pos,
                    row_slot, out, win=win, ring=ring, scale=scale, kv_heads=kv_heads)


def cudnn(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
          kv_heads):
    """SDPA's cuDNN backend on the padded, masked batch."""
    common.run_peer(lambda torch, batch: masked_sdpa(torch, batch, "cudnn", CUDNN_BLOCK), q, k_cache, v_cache,
                    row_pos, row_slot, out, win=win, ring=ring, scale=scale, kv_heads=kv_heads)


def flash(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
          kv_heads):
    """torch's flash-attention kernel through its varlen op on the packed batch (no padding, no mask)."""
    common.run_peer(flash_varlen, q, k_cache, v_cache, row_pos, row_slot, out, win=win, ring=ring, scale=scale,
                    kv_heads=kv_heads)


def flex(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
         kv_heads):
    """Compiled flex_attention (its decoding kernel for one query row) with a block mask of the rows' lengths."""
    common.run_peer(flex_lengths, q, k_cache, v_cache, row_pos, row_slot, out, win=win, ring=ring, scale=scale,
                    kv_heads=kv_heads)


def masked_sdpa(torch, batch, name: str, block: int = 1):
    """[B, Hq, D] from one SDPA call over the batch padded to its longest row (rounded up to whole `block`s),
    padding masked out."""
    k, v, valid = common.gather_padded(torch, batch, -(-batch.longest // block) * block)
    mask = valid[:, None, None, :]  # [B, 1, 1, L]
    return sdpa_heads(torch, name, batch.q.unsqueeze(2), k, v, mask, batch).squeeze(2)


def sdpa_heads(torch, name: str, q4, k, v, mask, batch):
    """SDPA under backend `name` with enable_gqa where Hq != Hk, else (refused) with the key heads repeated."""
    if batch.hq == batch.hk:
        PATHS[name] = "one key head per query head"
        return sdpa_call(torch, name, q4, k, v, mask, batch.scale, gqa=False)
    try:
        result = sdpa_call(torch, name, q4, k, v, mask, batch.scale, gqa=True)
        PATHS[name] = "enable_gqa=True"
        return result
    except RuntimeError as gqa_error:
        k = k.repeat_interleave(batch.group, dim=1)  # key head h // G for query head h
        v = v.repeat_interleave(batch.group, dim=1)
        try:
            result = sdpa_call(torch, name, q4, k, v, mask, batch.scale, gqa=False)
        except RuntimeError as error:
            raise RuntimeError(f"{error}; with enable_gqa=True: {gqa_error}") from None
        PATHS[name] = f"repeat_interleave of key heads (enable_gqa=True refused: {gqa_error})"
        return result


def sdpa_call(torch, name: str, q4, k, v, mask, scale: float, *, gqa: bool):
    """One scaled_dot_product_attention call under sdpa_kernel(backend); a refusal raises RuntimeError with
    torch's reasons (its warnings) in one line."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, BACKENDS[name])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q4, k, v, attn_mask=mask, dropout_p=0.0,
                                                                        scale=scale, enable_gqa=gqa)
        except RuntimeError as error:
            reasons = [str(w.message).strip().splitlines()[0][:200] for w in caught if str(w.message).strip()]
            why = f" ({'; '.join(reasons[:4])})" if reasons else ""
            raise RuntimeError(f"torch refused SDPA backend {backend.name}: {common.first_line(error)}"
                               f"{why}") from None


def flash_op(torch):
    """torch.ops.aten._flash_attention_forward, its schema checked; None where torch has no such op."""
    try:
        op = torch.ops.aten._flash_attention_forward
        schema = op.default._schema
    except (AttributeError, RuntimeError):
        return None
    names = tuple(argument.name for argument in schema.arguments)
    if names[:len(FLASH_ARGS)] != FLASH_ARGS or "scale" not in names:
        raise RuntimeError(f"torch's _flash_attention_forward has an unexpected schema: {schema}")
    return op


def flash_varlen(torch, batch):
    """[B, Hq, D] from the flash varlen op: one query per row, the rows' keys packed; GQA native to flash."""
    op = flash_op(torch)
    if op is None:
        return flash_by_length(torch, batch)
    k, v, cum_k = common.gather_packed(torch, batch)
    cum_q = torch.arange(batch.rows + 1, device=batch.q.device, dtype=torch.int32)
    try:
        result = op(batch.q.contiguous(), k, v, cum_q, cum_k, 1, batch.longest, 0.0, False, False,
                    scale=batch.scale)
    except RuntimeError as error:
        raise RuntimeError(f"torch refused its flash varlen op: {common.first_line(error)}") from None
    PATHS["flash"] = "aten._flash_attention_forward (varlen)"
    return result[0]


def flash_by_length(torch, batch):
    """[B, Hq, D] where torch has no varlen op: rows of equal key counts in one unmasked flash SDPA call each."""
    import numpy as np

    k, v, _ = common.gather_padded(torch, batch, batch.longest)
    result = torch.empty_like(batch.q)
    for count in sorted(set(batch.count_host.tolist())):
        rows = torch.as_tensor(np.flatnonzero(batch.count_host == count), device=batch.q.device)
        q4 = batch.q[rows].unsqueeze(2)
        k_rows = k[rows][:, :, :count].contiguous()
        v_rows = v[rows][:, :, :count].contiguous()
        result[rows] = sdpa_heads(torch, "flash", q4, k_rows, v_rows, None, batch).squeeze(2)
    PATHS["flash"] = "grouped by key count (no varlen op); " + PATHS.get("flash", "")
    return result


def compiled_flex(torch):
    """torch.compile(flex_attention), made once per process; recompiles past the limit raise, never fall back
    to the unfused eager path."""
    if "flex" not in _COMPILED:
        from torch.nn.attention.flex_attention import flex_attention

        config = torch._dynamo.config
        for name in ("recompile_limit", "cache_size_limit"):  # new and old names of the per-frame limit
            if hasattr(config, name):
                setattr(config, name, max(int(getattr(config, name)), 64))
        if hasattr(config, "fail_on_recompile_limit_hit"):
            config.fail_on_recompile_limit_hit = True
        _COMPILED["flex"] = torch.compile(flex_attention)
    return _COMPILED["flex"]


def length_mask(count):
    """mask_mod: key kv_idx is visible to row b when it is one of the row's count[b] keys."""
    def visible(b, h, q_idx, kv_idx):
        return kv_idx < count[b]

    return visible


def flex_lengths(torch, batch, attend=None):
    """[B, Hq, D] from one flex_attention call over the batch padded to whole blocks; `attend` replaces the
    compiled flex_attention (tests on a CPU pass the eager one)."""
    from torch.nn.attention.flex_attention import create_block_mask

    length = -(-batch.longest // FLEX_BLOCK) * FLEX_BLOCK
    k, v, _ = common.gather_padded(torch, batch, length)
    attend = compiled_flex(torch) if attend is None else attend
    try:
        block_mask = create_block_mask(length_mask(batch.count), batch.rows, None, 1, length,
                                       device=batch.q.device)
        result = attend(batch.q.unsqueeze(2), k, v, block_mask=block_mask, scale=batch.scale,
                        enable_gqa=batch.hq != batch.hk)
    except Exception as error:  # noqa: BLE001 - compile and lowering errors come in many types
        raise RuntimeError(f"flex_attention failed: {common.first_line(error)}") from None
    PATHS["flex"] = "torch.compile(flex_attention), block mask of row lengths"
    return result.squeeze(2)
