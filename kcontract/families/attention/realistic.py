"""Gate 1's realistic rows: q and k RMS from the declared ranges, mean-shifted v, peaked keys."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.draws import bf16_bits_parallel, drawn_keys_values
from kcontract.families.attention.rows import RowData, scaled_normal
from kcontract.families.attention.spec import Shape, Values
from kcontract.families.attention.window import Window
from kcontract.numerics import rn_bits

ROW_KINDS = ("plain", "mean-shifted", "peaked", "peaked+mean-shifted")


def realistic_row(rng: np.random.Generator, shape: Shape, values: Values, window: Window, pos: int,
                  kind: str, scale: float) -> RowData:
    """Draw one row of the given kind; every value is bf16-exact."""
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    first = window.first(pos)
    n = pos - first + 1
    q = scaled_normal(rng, (hq, d), rng.uniform(*values.q_rms, size=hq))
    k, v = drawn_keys_values(int(rng.integers(2**63)), rng.uniform(*values.k_rms, size=(n, hk)), values.v_rms, d)
    if "mean-shifted" in kind:
        signs = rng.choice([-1.0, 1.0], size=(hk, d))
        v += (signs * rng.uniform(0.5, 1.5, size=(hk, d)) * values.v_mean).astype(np.float32)
    if "peaked" in kind and values.peaked_keys and values.peak_nats:
        add_peaks(rng, q, k, shape, min(values.peaked_keys, n), values.peak_nats, scale)
    return RowData(pos=pos, first=first, q=rn_bits(q, "bf16"), k=bf16_bits_parallel(k), v=bf16_bits_parallel(v),
                   filler_seed=int(rng.integers(2**31)), tag=kind)


def add_peaks(rng: np.random.Generator, q: np.ndarray, k: np.ndarray, shape: Shape, count: int,
              nats: float, scale: float, where: np.ndarray | None = None) -> np.ndarray:
    """Raise `count` keys (or those at `where`) so their group-mean score rises by about `nats`."""
    keys = where if where is not None else rng.choice(len(k), size=count, replace=False)
    for kh in range(shape.kv_heads):
        group = q[kh * shape.group:(kh + 1) * shape.group]
        direction = group.mean(axis=0)
        direction /= np.linalg.norm(direction)
        gain = float(np.mean(group @ direction)) * scale
        if gain > 0:
            k[keys, kh] += direction * (nats / gain)
    return keys


def stream_rows(rng: np.random.Generator, shape: Shape, values: Values, window: Window, positions: list[int],
                streams: int, scale: float) -> list[RowData]:
    """Rows at `positions` over `streams` sequences (row i reads stream i % streams); each stream is drawn once as
    a realistic row of its own kind up to its last row, and its rows share that row's query and keys."""
    rows: list[RowData | None] = [None] * len(positions)
    for s in range(streams):
        mine = [i for i in range(len(positions)) if i % streams == s]
        if not mine:
            continue
        top = max(positions[i] for i in mine)
        seq = realistic_row(rng, shape, values, window, top, ROW_KINDS[s % len(ROW_KINDS)], scale)
        for i in mine:
            pos = positions[i]
            rows[i] = RowData(pos=pos, first=window.first(pos), q=seq.q, k=seq.k[:pos + 1], v=seq.v[:pos + 1],
                              filler_seed=seq.filler_seed, tag=f"stream{s}-{seq.tag}")
    return rows


def sequence_rows(rng: np.random.Generator, shape: Shape, values: Values, window: Window, top: int,
                  positions: list[int], scale: float) -> list[RowData]:
    """Rows at several positions of one drawn sequence (one cache slot), each with its own query."""
    span = Window(win=window.ring, ring=window.ring) if window.win else window  # keys the slot still holds
    seq = realistic_row(rng, shape, values, span, top, "mean-shifted", scale)
    rows = []
    for i, pos in enumerate(positions):
        first = window.first(pos)
        if first < seq.first or pos > top:
            raise ValueError(f"row at {pos} reads keys the sequence's slot no longer holds")
        q = scaled_normal(rng, (shape.q_heads, shape.head_dim), rng.uniform(*values.q_rms, size=shape.q_heads))
        rows.append(RowData(pos=pos, first=first, q=rn_bits(q, "bf16"), k=seq.k[first - seq.first:pos - seq.first + 1],
                            v=seq.v[first - seq.first:pos - seq.first + 1], filler_seed=seq.filler_seed,
                            tag="filler"))
    return rows
