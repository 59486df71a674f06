"""The variant runs every batched kernel owes the variants suite: the same rows alone, inside batches of several
sizes at the first, middle and last slot, permuted, rerun, and beside another call on a second stream.

A family gives how to build a call from a list of members (a base row's index, or a filler as -1 - k) and adds
the variants only it knows (a longer cache, another split); the row maps follow from the members.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kcontract.problem import Problem, Variant

BATCH_SIZES = (2, 7, 16, 64)
SLOTS = ("first", "middle", "last")
CONCURRENT_MATES = 7  # filler rows of the call run beside the base rows on a second stream

Build = Callable[[str, str, list[int]], Problem]  # (kind, label, members) -> the call; kinds as yielded below


def slot_index(where: str, size: int) -> int:
    """Batch index for 'first', 'middle' or 'last'."""
    return {"first": 0, "middle": size // 2, "last": size - 1}[where]


def filler(k: int) -> int:
    """The member value of filler row k."""
    return -1 - k


def batch_variants(rows: int, fillers: int, build: Build, sizes: tuple[int, ...] = BATCH_SIZES) -> Iterator[Variant]:
    """Every generic variant of a base call of `rows` rows, built one at a time as the gate asks for it: `solo`,
    `batch` (each size at each slot, the base rows taking turns), `permuted`, `rerun` and `concurrent` (with a
    call of fillers beside it). `fillers` is how many distinct filler rows the family drew (at least one)."""
    for b in range(rows):
        yield Variant(f"solo_row{b}", build("solo", f"solo_row{b}", [b]), {b: 0})
    target = 0
    for size in sizes:
        for where in SLOTS:
            at = slot_index(where, size)
            mates = [filler(i % fillers) for i in range(size - 1)]
            label = f"batch{size}_{where}_row{target}"
            yield Variant(label, build("batch", label, mates[:at] + [target] + mates[at:]), {target: at})
            target = (target + 1) % rows
    order = list(reversed(range(rows)))
    yield Variant("permuted", build("permuted", "permuted", order), {b: order.index(b) for b in range(rows)})
    same = {b: b for b in range(rows)}
    yield Variant("rerun", build("rerun", "rerun", list(range(rows))), same)
    mates = [filler(i) for i in range(max(1, min(CONCURRENT_MATES, fillers)))]
    other = build("other", "concurrent_other", mates)
    yield Variant("concurrent", build("rerun", "concurrent", list(range(rows))), same, concurrent_with=other)
