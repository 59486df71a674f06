"""Small torch targets for `kcontract drift`'s tests: one whose ops depend on the batch size, one whose factory
returns the wrong thing, one whose model raises, one with an op of two outputs and one whose activations are
large."""

from __future__ import annotations

import torch

_LIBRARY = torch.library.Library("kctest", "DEF")  # the test ops' namespace


def _requests(n: int, tokens: int) -> torch.Tensor:
    return torch.randn(n, tokens, 16, generator=torch.Generator().manual_seed(1))


def branching(seed: int = 0):
    """A model that runs an extra op in batches of more than 4: its op streams cannot be aligned."""
    def model(x):
        y = x * 2
        return torch.tanh(y) if x.shape[0] > 4 else y

    return model, _requests


def not_a_pair(seed: int = 0):
    """A factory that returns a number."""
    return 3


def failing(seed: int = 0):
    """A model that raises on a batch."""
    def model(x):
        raise ValueError("shapes do not match")

    return model, _requests


def attention_like(seed: int = 0):
    """A model whose one op returns two tensors, as SDPA's fused variants do: its output keeps its bits in a batch,
    its logsumexp moves by an ulp there."""
    if not hasattr(torch.ops.kctest, "attend"):
        _LIBRARY.define("attend(Tensor x) -> (Tensor output, Tensor logsumexp)")
        _LIBRARY.impl("attend", _attend, "CPU")

    def model(x):
        output, _ = torch.ops.kctest.attend(x * 2)
        return output

    return model, _requests


def _attend(x):
    lse = torch.logsumexp(x, -1)
    return x * 0.5, torch.nextafter(lse, torch.tensor(float("inf"))) if x.shape[0] > 1 else lse


def wide(seed: int = 0):
    """Requests of 1,024 features a token through a chain of element-wise ops after one that mixes the batch
    (every later op differs): activations, not weights, fill its memory."""
    def model(x):
        y = x - 1e-3 * x.mean(0, keepdim=True)
        for _ in range(4):
            y = torch.tanh(y) * 1.5 + 0.25
        return y

    def requests(n: int, tokens: int) -> torch.Tensor:
        return torch.randn(n, tokens, 1024, generator=torch.Generator().manual_seed(seed))

    return model, requests
