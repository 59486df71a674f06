"""The request's part of each op output while a batch runs, so that recording a batch holds about one request's
outputs whatever its size: the batch's ops are followed run by run against the request alone, as align pairs
them."""

from __future__ import annotations

import torch

from kcontract.drift.align import runs
from kcontract.drift.compare import part
from kcontract.drift.record import Op


class RequestPart:
    """A recorder's `keep`: of each output of the batch's op, the request's share along its grown dimension (or
    the whole, where its shape is the alone run's), and, where the batch repeats a run once per request, the
    copies at the request's slot whole; None where the comparison will not read it."""

    def __init__(self, alone: list[Op], batch: int, position: int):
        self.runs, self.batch, self.position = runs(alone), batch, position
        self.run, self.count, self.key = -1, 0, None

    def __call__(self, key: tuple[str, str], outputs: list[torch.Tensor]) -> list[torch.Tensor | None]:
        if key != self.key:
            self.key, self.run, self.count = key, self.run + 1, 0
        j, self.count = self.count, self.count + 1
        if self.run >= len(self.runs) or self.runs[self.run][0] != key:
            return [None] * len(outputs)  # the streams differ here: align refuses them
        ops = self.runs[self.run][1]
        if j < len(ops):  # paired one to one (or the request's own copy at slot 0)
            return [part(tuple(a.shape), t, self.batch, self.position) for a, t in zip(ops[j].outputs, outputs)]
        mine = self.position * len(ops) <= j < (self.position + 1) * len(ops)
        return list(outputs) if mine else [None] * len(outputs)
