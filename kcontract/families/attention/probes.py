"""Order probes: rows whose fp32 sums change bits under any change of summation order (gate 2), or under any
other order than the declared one, across chunks or inside one (gate 1)."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.rows import BITS_BLOCK, RowData, repeated_keys
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.window import Window
from kcontract.numerics import rn_bits

BIG = 2.0**22  # cancelling pairs this large absorb small terms at a granularity of half a unit in fp32
PAIRS = 6  # cancelling pairs per value column
STEP_KEYS = 16  # keys of one tensor-core k-step; the in-chunk probe's -BIG opens the chunk's second one


def order_probe_row(rng: np.random.Generator, shape: Shape, window: Window, pos: int,
                    chunk: int | None = None) -> RowData:
    """q = 0 (every p exactly 1); v small values plus +BIG/-BIG pairs at random keys, per column.

    The exact output is the mean of the small values; an fp32 evaluation absorbs them into the large partial
    sums in a way that depends on which keys share a chunk and in what order partials are added, so a split or
    order chosen from the batch, the slot or the cache length changes most outputs' bits. Given `chunk` (gate 1
    under a declared order), a chunk holding a large value has no other nonzero value in its column, so every
    chunk's own sum is exact (whatever a tensor core does inside it) and only the merge of chunks rounds.
    """
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    first = window.first(pos)
    n = pos - first + 1
    sixteenths = rn_bits(np.arange(-16, 17) / 16.0, "bf16")  # every small value is exact in bf16
    v = looked_up(sixteenths, rng.integers(0, 33, size=(n, hk, d), dtype=np.int8))  # one byte a draw (long rows)
    big, minus_big = rn_bits(np.array([BIG, -BIG]), "bf16")
    if n >= 2:
        for kh in range(hk):
            for col in range(d):
                pairs = max(1, min(PAIRS, n // (4 * chunk))) if chunk else PAIRS
                keys = rng.choice(n, size=min(2 * pairs, n - n % 2), replace=False)
                half = len(keys) // 2
                if chunk:
                    starts = ((keys + first) // chunk) * chunk - first  # each large value's chunk, row-relative
                    for start in starts:
                        v[max(0, start):start + chunk, kh, col] = 0
                v[keys[:half], kh, col] = big
                v[keys[half:2 * half], kh, col] = minus_big
    return RowData(pos=pos, first=first, q=rn_bits(np.zeros((hq, d)), "bf16"), k=repeated_keys(rng, n, hk, d), v=v,
                   filler_seed=int(rng.integers(2**31)), tag="order-probe")


def looked_up(table: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """table[draws], a block of about BITS_BLOCK draws at a time (the indices widen to intp a block at a time)."""
    found = np.empty(draws.shape, table.dtype)
    keys = max(1, BITS_BLOCK // max(1, draws[0].size)) if len(draws) else 1
    for i in range(0, len(draws), keys):
        np.take(table, draws[i:i + keys], out=found[i:i + keys])
    return found


def in_chunk_probe_row(rng: np.random.Generator, shape: Shape, window: Window, pos: int, chunk: int,
                       last: int | None = None) -> RowData | None:
    """q = 0 (every p exactly 1); per value column one whole chunk (at absolute positions, ending by `last`) holds
    +BIG at its first key, -BIG at its 17th, multiples of 1/2 between, of 1/8 on keys 17 to 31 and of 1/16 on keys
    32 to 63; every other value of the column is 0. None where no whole chunk fits.

    In the declared order of a chunk (keys in order in fp32 chains of 17 keys or more, or tensor-core k-steps of
    16 keys in order from the chunk's first) every step is exact: BIG and the halves make an fp32 value, -BIG
    cancels it in the next step, and what is left is small. An order that adds any later key before the first
    two rounds it into a value of BIG's binade and loses its low bits, so the output moves by 1/16 or more in a
    sum of a few units: a key order inside a chunk other than the declared one rounds apart even where the
    kernel hides its partials.
    """
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    first = window.first(pos)
    last = pos if last is None else min(last, pos)
    whole = np.arange(-(-first // chunk), (last + 1) // chunk)  # chunks inside [first, last]
    if chunk < 2 * STEP_KEYS or len(whole) == 0:
        return None
    n = pos - first + 1
    halves, eighths, sixteenths = (rn_bits(np.arange(-r, r + 1) / unit, "bf16")  # -2 to 2, -2 to 2, -1 to 1
                                   for r, unit in ((4, 2.0), (16, 8.0), (16, 16.0)))
    v = np.zeros((n, hk, d), dtype=np.uint16)  # bf16 +0
    starts = rng.choice(whole, size=(hk, d)) * chunk - first  # each column's chunk, row-relative
    tail = min(chunk, 4 * STEP_KEYS)
    big, minus_big = rn_bits(np.array([BIG, -BIG]), "bf16")
    for kh in range(hk):
        for col in range(d):
            at = starts[kh, col]
            v[at:at + tail, kh, col] = np.concatenate([
                [big], halves[rng.integers(0, 9, STEP_KEYS - 1)], [minus_big],
                eighths[rng.integers(0, 33, STEP_KEYS - 1)], sixteenths[rng.integers(0, 33, tail - 2 * STEP_KEYS)]])
    return RowData(pos=pos, first=first, q=rn_bits(np.zeros((hq, d)), "bf16"), k=repeated_keys(rng, n, hk, d),
                   v=v, filler_seed=int(rng.integers(2**31)), tag="in-chunk-order-probe")


def order_cause(sum_order: str) -> str:
    """What a red on order probes means."""
    return (f"an order other than the declared sum_order {sum_order}: the keys of a chunk or the chunks summed out "
            f"of it (these probes round apart under any other order)")


def gate1_probe_rows(rng: np.random.Generator, shape: Shape, window: Window, positions: list[int], chunk: int,
                     lasts: list[int] | None = None) -> list[RowData]:
    """Gate 1's order probes at each position: one across chunks (order_probe_row), then one inside a chunk
    (in_chunk_probe_row) where a whole chunk ends by the position's `lasts` (default: the position)."""
    across = [order_probe_row(rng, shape, window, pos, chunk) for pos in positions]
    inside = [in_chunk_probe_row(rng, shape, window, pos, chunk, last)
              for pos, last in zip(positions, lasts or positions)]
    return across + [row for row in inside if row is not None]


def probe_positions(rows: list[RowData]) -> list[int]:
    """Two probe rows per case: at its longest row's position and at a shorter one."""
    positions = sorted({r.pos for r in rows})
    return [positions[-1], positions[len(positions) // 2]]
