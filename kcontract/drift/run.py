"""One request alone and inside batches at several slots, its op streams aligned and compared."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from kcontract.drift.align import align
from kcontract.drift.compare import Difference, difference, part
from kcontract.drift.record import Op, record
from kcontract.drift.slices import RequestPart
from kcontract.drift.target import Target
from kcontract.errors import UsageError

SLOTS = ("first", "middle", "last")


@dataclass
class OpDrift:
    """An op whose output for the request differs in a batch: the op alone and in the batch (its outputs not
    kept), and how much."""

    alone: Op
    batched: Op
    worst: Difference  # the output of the op that differs most
    output: int = 0  # which of the op's outputs that is

    @property
    def label(self) -> str:
        """`output 1 (logsumexp)` where the op returns several values, else ""."""
        return self.alone.output_label(self.output)

    @property
    def index(self) -> int:
        return self.alone.index


@dataclass
class Placement:
    """The request at one slot of one batch: the ops that differ, in order, and its output's difference."""

    batch: int
    slot: str
    position: int
    drifts: list[OpDrift] = field(default_factory=list)
    output: Difference | None = None
    uncompared: int = 0  # outputs with no part that is the request's

    @property
    def first(self) -> OpDrift | None:
        return self.drifts[0] if self.drifts else None


@dataclass
class Drift:
    """Everything one `kcontract drift` measured."""

    target: str
    dtype: str
    device: str
    tokens: int
    context: int  # cached positions before the request's tokens
    seed: int
    ops: int  # computing ops of one forward
    placements: list[Placement]

    @property
    def first(self) -> tuple[Placement, OpDrift] | None:
        """The earliest differing op over every placement, with the placement that shows it."""
        found = [(p.first.index, i, p) for i, p in enumerate(self.placements) if p.first]
        if not found:
            return None
        _, _, placement = min(found, key=lambda f: (f[0], f[1]))
        return placement, placement.first


def slot_position(slot: str, batch: int) -> int:
    """first: 0, middle: batch // 2, last: batch - 1."""
    return {"first": 0, "middle": batch // 2, "last": batch - 1}[slot]


def placed(pool: torch.Tensor, batch: int, position: int) -> torch.Tensor:
    """A batch of `batch` requests from the pool with request 0 at `position` and requests 1 .. around it."""
    others = pool[1:batch]
    return torch.cat([others[:position], pool[:1], others[position:]])


def measure(target: Target, tokens: int, batches: list[int], slots: list[str], seed: int, context: int = 0) -> Drift:
    """Run the request alone and at each (batch, slot); compare every aligned op's output for the request."""
    pool = target.requests(max(batches), tokens)
    if not isinstance(pool, torch.Tensor) or pool.dim() < 1 or pool.shape[0] != max(batches):
        raise UsageError(f"{target.label}: requests({max(batches)}, {tokens}) must return a tensor whose dim 0 is "
                         f"the {max(batches)} requests; it returned "
                         f"{tuple(pool.shape) if isinstance(pool, torch.Tensor) else type(pool).__name__}")
    dtype, device = str(pool.dtype).removeprefix("torch."), pool.device.type
    alone_ops, alone_out = record(target.model, pool[:1])
    placements = []
    for batch in batches:
        seen = set()
        for slot in slots:
            position = slot_position(slot, batch)
            if position not in seen:
                seen.add(position)
                placements.append(_placement(target, pool, alone_ops, alone_out, batch, slot, position))
    return Drift(target.label, dtype, device, tokens, context, seed, len(alone_ops), placements)


def _placement(target, pool, alone_ops: list[Op], alone_out, batch: int, slot: str, position: int) -> Placement:
    """The request at one slot of one batch, compared op by op with the request alone: the batch's recording keeps
    only the request's part of each output, and a differing op keeps none."""
    ops, out = record(target.model, placed(pool, batch, position), RequestPart(alone_ops, batch, position))
    result = Placement(batch, slot, position)
    for pair in align(target.label, alone_ops, ops, batch, position, slot):
        compared = [(k, a, b) for k, (a, b) in enumerate(zip(pair.alone.outputs, pair.batched.outputs))
                    if b is not None and a.shape == b.shape]
        result.uncompared += len(pair.alone.outputs) - len(compared)
        worst = max(((k, difference(a, b)) for k, a, b in compared), key=lambda d: d[1].fraction, default=None)
        if worst is not None and worst[1].differing:
            result.drifts.append(OpDrift(pair.alone, replace(pair.batched, outputs=[]), worst[1], worst[0]))
    share = part(tuple(alone_out.shape), out, batch, position)
    result.output = difference(alone_out, share) if share is not None else None
    return result
