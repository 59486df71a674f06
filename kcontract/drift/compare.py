"""The request's part of an op's output in a batch, and how far its bits lie from the request run alone."""

from __future__ import annotations

from dataclasses import dataclass

import torch

INTS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16,
        torch.float16: torch.int16}


def part(alone_shape: tuple[int, ...], t: torch.Tensor, batch: int, slot: int) -> torch.Tensor | None:
    """The slot's part of `t`: the whole where its shape is the alone run's, else the slot's share along the one
    dimension that is `batch` times the alone run's; None where no such dimension exists."""
    shape = tuple(t.shape)
    if shape == alone_shape:
        return t
    if len(shape) != len(alone_shape):
        return None
    grown = [d for d, (a, b) in enumerate(zip(alone_shape, shape)) if a != b]
    if len(grown) != 1 or shape[grown[0]] != batch * alone_shape[grown[0]]:
        return None
    size = alone_shape[grown[0]]
    return t.narrow(grown[0], slot * size, size)


@dataclass
class Difference:
    """How one output of the request differs: elements compared and differing, and the largest ulp distance."""

    elements: int
    differing: int
    max_ulps: int | None  # None for integer and boolean outputs

    @property
    def fraction(self) -> float:
        return self.differing / self.elements if self.elements else 0.0


def ordered(t: torch.Tensor) -> torch.Tensor:
    """A float tensor's bits as integers in the order of the values (adjacent floats differ by one)."""
    bits = t.contiguous().view(INTS[t.dtype]).to(torch.int64)
    width = t.element_size() * 8
    magnitude = bits & ((1 << (width - 1)) - 1)
    return torch.where(bits < 0, -magnitude, magnitude)


def difference(a: torch.Tensor, b: torch.Tensor) -> Difference:
    """Element-wise bit comparison of the request alone (a) and in a batch (b); NaNs at the same places agree."""
    a, b = a.detach().cpu(), b.detach().cpu()
    if a.dtype in INTS:
        oa, ob = ordered(a), ordered(b)
        both_nan = torch.isnan(a) & torch.isnan(b)
        apart = (a.contiguous().view(INTS[a.dtype]) != b.contiguous().view(INTS[b.dtype])) & ~both_nan
        ulps = (oa - ob).abs().masked_fill(~apart, 0)
        return Difference(a.numel(), int(apart.sum()), int(ulps.max()) if a.numel() else 0)
    apart = a != b
    return Difference(a.numel(), int(apart.sum()), None)
