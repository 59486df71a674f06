"""torch's scaled_dot_product_attention on the same call, where torch has a fused kernel for it."""

from __future__ import annotations

FUSED_HEAD_DIMS = (64, 128, 256)  # flash attention's head dims; at 512 torch falls back to unfused math


def sdpa_us(timer, sdpa: dict, repeat: int) -> tuple[float | None, str]:
    """Median microseconds of torch's flash SDPA on the call (None and why where it has none)."""
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None, "no torch"
    if sdpa.get("head_dim") not in FUSED_HEAD_DIMS:
        return None, f"no fused kernel at head dim {sdpa.get('head_dim')}"
    b, hq, hk, n, d = (sdpa[k] for k in ("batch", "q_heads", "kv_heads", "keys", "head_dim"))
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) * 0.1
    v = torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.ExternalStream(timer.stream.ptr)

    def launch(_stream) -> None:
        with torch.cuda.stream(stream), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=sdpa.get("scale"), enable_gqa=hq != hk)

    try:
        return timer.events(launch, repeat), "flash"
    except RuntimeError as error:
        return None, f"torch: {str(error).splitlines()[0][:80]}"
    finally:
        del q, k, v
        torch.cuda.empty_cache()
