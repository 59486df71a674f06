"""Gate 3's merge-stress rows: chunk maxima tens of nats apart, rows ending on chunk edges."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.realistic import add_peaks, realistic_row
from kcontract.families.attention.spec import Shape, Stress, Values
from kcontract.families.attention.window import Window
from kcontract.numerics import from_bits, rn_bits


def stress_positions(stress: Stress, chunk: int) -> list[int]:
    """Row ends: the last key of the last chunk, a chunk's first key, mid-chunk, the first chunk's edges."""
    n = stress.chunks
    return [n * chunk - 1, (n // 2) * chunk, (n // 3) * chunk + chunk // 2, chunk - 1, chunk, 2]


def first_key_peak(near: int) -> int:
    """The chunk at or below chunk `near` whose peak sits on its first key (stress_row places chunk c's on its
    first, last or middle key as c % 3 is 0, 1 or 2)."""
    return near - near % 3


def stress_row(rng: np.random.Generator, shape: Shape, values: Values, window: Window, pos: int, chunk: int,
               gap_nats: float, scale: float, rising: bool = False):
    """A realistic row whose chunks each get one peaked key at a chunk-specific height in [0, gap_nats]; `rising`
    sorts the heights, so the running maximum of an online merge grows at every chunk and each rescale of its
    running sums counts."""
    row = realistic_row(rng, shape, values, window, pos, "mean-shifted", scale)
    q = from_bits(row.q, "bf16")
    cid = (np.arange(row.first, pos + 1) // chunk) - row.first // chunk
    chunks = np.unique(cid)
    peaks = np.array([np.flatnonzero(cid == c)[[0, -1, (cid == c).sum() // 2][c % 3]] for c in chunks])
    k = from_bits(row.k[peaks], "bf16")  # the peaked keys: the only ones that change
    rise = np.sort(rng.uniform(0.0, gap_nats, size=len(chunks))) if rising else None
    for i, c in enumerate(chunks):  # the peak sits on the chunk's first, last or middle key
        if rise is not None:
            height = rise[c]
        else:
            height = gap_nats if c % 7 == 0 else rng.uniform(0.0, gap_nats)
        add_peaks(rng, q, k, shape, 1, height, scale, where=np.array([i]))
    row.k[peaks] = rn_bits(k, "bf16")
    row.tag = "merge-stress"
    return row


def stress_window(stress: Stress, chunk: int) -> Window:
    """A linear cache long enough for the longest stress row."""
    return Window(win=0, ring=stress.chunks * chunk)

