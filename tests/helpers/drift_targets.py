"""Small torch targets for `kcontract drift`'s tests: one whose ops depend on the batch size, one whose factory
returns the wrong thing, and one whose model raises."""

from __future__ import annotations

import torch


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
