"""The attention families' bench peer: torch's scaled_dot_product_attention on the same call, where torch has a
fused kernel for it."""

from __future__ import annotations

import functools
from typing import Callable

FUSED_HEAD_DIMS = (64, 128, 256)  # flash attention's head dims; at 512 torch falls back to unfused math


def torch_sdpa(sdpa: dict) -> Callable[[object, int], tuple[float | None, str]]:
    """The peer of a bench call: (timer, repeat) -> torch's median microseconds on the same call, or None and why."""
    return functools.partial(sdpa_us, sdpa=sdpa)


def sdpa_us(timer, repeat: int, sdpa: dict) -> tuple[float | None, str]:
    """Median microseconds of torch's fused SDPA on the call (None and why where it has none): flash for decode
    rows; for a causal prompt chunk (`queries` rows, mask aligned to the last key) flash, else memory-efficient
    attention, the only fused kernel torch has at head dim 512."""
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None, "no torch"
    prompt = "queries" in sdpa
    if not prompt and sdpa.get("head_dim") not in FUSED_HEAD_DIMS:
        return None, f"no fused kernel at head dim {sdpa.get('head_dim')}"
    b, hq, hk, n, d = (sdpa[k] for k in ("batch", "q_heads", "kv_heads", "keys", "head_dim"))
    q = torch.randn(b, hq, sdpa.get("queries", 1), d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) * 0.1
    v = torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16)
    mask = None
    if prompt:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(q.shape[2], n)
        if hq != hk:  # the lower-right bias takes no grouped heads: repeat the key heads
            k, v = (x.repeat_interleave(hq // hk, dim=1) for x in (k, v))
    stream = torch.cuda.ExternalStream(timer.stream.ptr)
    backends = [SDPBackend.FLASH_ATTENTION] + ([SDPBackend.EFFICIENT_ATTENTION] if prompt else [])
    try:
        for backend in backends:
            def launch(_stream, backend=backend) -> None:
                with torch.cuda.stream(stream), sdpa_kernel(backend):
                    torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=sdpa.get("scale"),
                                                                     enable_gqa=hq != k.shape[1])
            try:
                return timer.events(launch, repeat), backend.name.lower().replace("_attention", "")
            except RuntimeError as error:
                note = f"torch: {str(error).splitlines()[0][:80]}"
        return None, note
    finally:
        del q, k, v
        torch.cuda.empty_cache()
