"""Gate 2's order probes: rows whose fp32 sums change bits under any change of summation order."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.rows import RowData, bf16_bits_of
from kcontract.families.attention.spec import Shape
from kcontract.families.attention.window import Window
from kcontract.numerics import rn_bits

BIG = 2.0**22  # cancelling pairs this large absorb small terms at a granularity of half a unit in fp32
PAIRS = 6  # cancelling pairs per value column


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
    v = sixteenths[rng.integers(0, 33, size=(n, hk, d), dtype=np.int8)]  # bits, one byte a draw (long rows)
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
    k = rng.standard_normal((n, hk, d), dtype=np.float32)
    k *= np.float32(0.1)
    return RowData(pos=pos, first=first, q=rn_bits(np.zeros((hq, d)), "bf16"), k=bf16_bits_of(k), v=v,
                   filler_seed=int(rng.integers(2**31)), tag="order-probe")


def probe_positions(rows: list[RowData]) -> list[int]:
    """Two probe rows per case: at its longest row's position and at a shorter one."""
    positions = sorted({r.pos for r in rows})
    return [positions[-1], positions[len(positions) // 2]]
