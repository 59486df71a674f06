"""A Llama-like stack for `kcontract drift`: RMSNorm, a fused QKV projection, SDPA over grouped key heads, the
output projection and a gated MLP, in 2 blocks; random weights from a seed, nothing downloaded.

Factories (TARGET `examples.drift.llama:NAME`): `small` runs in seconds on a CPU, `real` has an 8B-like width
(hidden 4,096, 32 query heads over 8 key heads, MLP 14,336); `small_row_by_row` and `real_row_by_row` compute
every matmul a row at a time and attention a request at a time, so no row's bits depend on its batch;
`small_greedy` ends in fp32 logits and returns the next token's id.
Each takes dtype, device, seed and context and returns (model, requests): requests(n, tokens) are n requests of
hidden states, [n, tokens, hidden]. With a context, each request's tokens come after that many cached keys and
values per layer (as a generation step after a prompt): a fixed random cache scaled by a factor the request's own
first value gives, so a request has the same cache in any batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class Config:
    hidden: int
    heads: int
    kv_heads: int
    mlp: int
    vocab: int
    blocks: int = 2
    eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


SMALL = Config(hidden=1024, heads=8, kv_heads=2, mlp=2816, vocab=4096)
REAL = Config(hidden=4096, heads=32, kv_heads=8, mlp=14336, vocab=32000)


class RowLinear(nn.Linear):
    """A linear layer that multiplies one row at a time: each row's sum has the same shape whatever the batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        out = torch.cat([F.linear(rows[i:i + 1], self.weight, self.bias) for i in range(rows.shape[0])])
        return out.reshape(*x.shape[:-1], self.out_features)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * w, in fp32, back to the input's dtype."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(hidden)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * self.weight.float()).to(x.dtype)


class Attention(nn.Module):
    """Causal self-attention over grouped key heads after `context` cached positions; `per_request` runs SDPA one
    request at a time."""

    def __init__(self, c: Config, linear: type, per_request: bool, context: int = 0):
        super().__init__()
        self.c, self.per_request, self.context = c, per_request, context
        self.qkv = linear(c.hidden, (c.heads + 2 * c.kv_heads) * c.head_dim, bias=False)
        self.o = linear(c.heads * c.head_dim, c.hidden, bias=False)
        if context:
            self.register_buffer("cache", torch.zeros(2, c.kv_heads, context, c.head_dim))  # K and V, drawn in build

    def cached(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V after the request's cache: the fixed cache times a factor from the request's first value."""
        if not self.context:
            return k, v
        factor = (1 + 0.1 * torch.tanh(x[:, :1, :1])).unsqueeze(1)  # [b, 1, 1, 1], element by element
        return torch.cat([self.cache[0] * factor, k], 2), torch.cat([self.cache[1] * factor, v], 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c, (b, t, _) = self.c, x.shape
        q, k, v = self.qkv(x).split([c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim], -1)
        q = q.view(b, t, c.heads, c.head_dim).transpose(1, 2)
        k = k.view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = v.view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        k, v = self.cached(x, k, v)
        mask = None  # added to the scores: token i sees the cache and tokens 0 .. i
        if t > 1 and self.context:
            seen = torch.ones(t, k.shape[2], dtype=torch.bool, device=x.device).tril(self.context)
            mask = torch.zeros(seen.shape, dtype=q.dtype, device=x.device).masked_fill(~seen, float("-inf"))
        causal = t > 1 and not self.context
        if self.per_request:
            y = torch.cat([F.scaled_dot_product_attention(q[i:i + 1], k[i:i + 1], v[i:i + 1], attn_mask=mask,
                                                          is_causal=causal, enable_gqa=True) for i in range(b)])
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(b, t, c.heads * c.head_dim))


class MLP(nn.Module):
    """down(silu(gate(x)) * up(x)), gate and up as one projection."""

    def __init__(self, c: Config, linear: type):
        super().__init__()
        self.gate_up = linear(c.hidden, 2 * c.mlp, bias=False)
        self.down = linear(c.mlp, c.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, -1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    """Pre-norm attention and MLP with residuals."""

    def __init__(self, c: Config, linear: type, per_request: bool, context: int = 0):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(c.hidden, c.eps), Attention(c, linear, per_request, context)
        self.mlp_norm, self.mlp = RMSNorm(c.hidden, c.eps), MLP(c, linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Model(nn.Module):
    """The blocks and a final norm: hidden states in, hidden states out; `greedy`: then fp32 logits of the last
    token and the next token's id, as a server picks it."""

    def __init__(self, c: Config, row_by_row: bool = False, greedy: bool = False, context: int = 0):
        super().__init__()
        linear = RowLinear if row_by_row else nn.Linear
        self.layers = nn.ModuleList(Block(c, linear, row_by_row, context) for _ in range(c.blocks))
        self.norm = RMSNorm(c.hidden, c.eps)
        self.head = nn.Linear(c.hidden, c.vocab, bias=False) if greedy else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        x = self.norm(x)
        if self.head is None:
            return x
        logits = F.linear(x[:, -1].float(), self.head.weight.float())
        return logits.argmax(-1)


def build(c: Config, row_by_row: bool, dtype=torch.float32, device: str = "cpu", seed: int = 0,
          greedy: bool = False, context: int = 0):
    """(model, requests): weights drawn from `seed`, scaled so activations stay near unit size; the caches too."""
    generator = torch.Generator().manual_seed(seed)
    model = Model(c, row_by_row, greedy, context)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p.shape[-1] if p.dim() > 1 else 1
            p.copy_(torch.randn(p.shape, generator=generator) / fan_in ** 0.5 if p.dim() > 1
                    else 1 + 0.1 * torch.randn(p.shape, generator=generator))
        for name, cache in model.named_buffers():
            cache.copy_(torch.randn(cache.shape, generator=generator))
    model = model.to(device=device, dtype=dtype).eval()

    def requests(n: int, tokens: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed + 1)
        return torch.randn(n, tokens, c.hidden, generator=g).to(device=device, dtype=dtype)

    return model, requests


def small(dtype=torch.float32, device: str = "cpu", seed: int = 0, context: int = 0):
    """Hidden 1,024: seconds on a CPU."""
    return build(SMALL, False, dtype, device, seed, context=context)


def small_row_by_row(dtype=torch.float32, device: str = "cpu", seed: int = 0, context: int = 0):
    """`small` with every matmul a row at a time and attention a request at a time."""
    return build(SMALL, True, dtype, device, seed, context=context)


def small_greedy(dtype=torch.bfloat16, device: str = "cpu", seed: int = 0, context: int = 0):
    """`small` in bf16 ending in fp32 logits and the next token's id."""
    return build(SMALL, False, dtype, device, seed, greedy=True, context=context)


def real(dtype=torch.bfloat16, device: str = "cuda", seed: int = 0, context: int = 0):
    """An 8B-like width."""
    return build(REAL, False, dtype, device, seed, context=context)


def real_row_by_row(dtype=torch.bfloat16, device: str = "cuda", seed: int = 0, context: int = 0):
    """`real` with every matmul a row at a time and attention a request at a time."""
    return build(REAL, True, dtype, device, seed, context=context)
