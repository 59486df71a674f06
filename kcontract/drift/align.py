"""Pairing the ops of the request alone with those of a batch: runs of the same op in the same module pair up
one to one, or, where the batch repeats a run once per request (a loop over rows or requests), the alone run's
ops pair with the copies at the request's slot."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from kcontract.drift.record import Op
from kcontract.errors import UsageError


@dataclass
class Pair:
    """An op of the request alone and its counterpart in the batch; `looped`: the batch ran it per request."""

    alone: Op
    batched: Op
    looped: bool


def runs(ops: list[Op]) -> list[tuple[tuple[str, str], list[Op]]]:
    """Consecutive ops grouped by (name, module)."""
    return [(key, list(group)) for key, group in groupby(ops, key=lambda op: (op.name, op.module))]


def align(label: str, alone: list[Op], batched: list[Op], batch: int, position: int, slot: str) -> list[Pair]:
    """The pairs, or one clear refusal where the streams differ in more than a loop over the batch."""
    a_runs, b_runs = runs(alone), runs(batched)
    where = f"in a batch of {batch} ({slot} slot)"
    if [k for k, _ in a_runs] != [k for k, _ in b_runs]:
        first = next((i for i, (x, y) in enumerate(zip(a_runs, b_runs)) if x[0] != y[0]), min(len(a_runs),
                                                                                                 len(b_runs)))
        said = (lambda rs: f"{rs[first][0][0]} in {rs[first][0][1] or 'the model'}" if first < len(rs) else "the end")
        raise UsageError(f"{label}: cannot align the op streams: after {first} runs of ops the request alone runs "
                         f"{said(a_runs)} and {where} {said(b_runs)}; the model's control flow depends on its "
                         f"batch or data")
    pairs = []
    for (key, a_ops), (_, b_ops) in zip(a_runs, b_runs):
        if len(b_ops) == len(a_ops):
            pairs += [Pair(a, b, False) for a, b in zip(a_ops, b_ops)]
        elif len(b_ops) == batch * len(a_ops):
            pairs += [Pair(a, b_ops[position * len(a_ops) + j], True) for j, a in enumerate(a_ops)]
        else:
            raise UsageError(f"{label}: cannot align the op streams: {key[0]} in {key[1] or 'the model'} runs "
                             f"{len(a_ops)} times alone and {len(b_ops)} times {where}, neither as often nor once "
                             f"per request")
    return pairs
