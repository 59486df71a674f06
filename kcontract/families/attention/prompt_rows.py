"""A prompt chunk's content: one sequence's keys and values, its rows' queries, and each row as a reference row."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kcontract.families.attention import mirrors
from kcontract.families.attention.prompt_spec import Sequence
from kcontract.families.attention.realistic import ROW_KINDS, realistic_row
from kcontract.families.attention.rows import RowData, scaled_normal
from kcontract.families.attention.spec import Shape, Values
from kcontract.families.attention.window import Window
from kcontract.numerics import rn_bits

QUERY_SHARE = 0.6  # a row's query: this share of the sequence's query direction, the rest its own
EARLIER = 37  # rows gate 2 may start a chunk sooner: realistic keys reach back to their windows too


@dataclass
class PromptSeq:
    """Rows start .. start + R - 1 of one sequence over keys key0 .. key0 + n - 1 (every key any row sees)."""

    seq: Sequence
    q: np.ndarray  # uint16 [R, Hq, D] bf16 bits, row order
    key0: int
    k: np.ndarray  # uint16 [n, Hk, D]
    v: np.ndarray  # uint16 [n, Hk, D]
    filler_seed: int = 0
    filler_value: float | None = None
    tag: str = ""

    def positions(self) -> np.ndarray:
        """Each row's own position."""
        return np.arange(self.seq.start, self.seq.end + 1)

    def row(self, i: int, window: Window) -> RowData:
        """Row i as a reference row: its keys [first of its position, its last visible key]."""
        pos = self.seq.start + i
        first, last = window.first(pos), self.seq.last_visible(pos)
        return RowData(pos=last, first=first, q=self.q[i], k=self.k[first - self.key0:last - self.key0 + 1],
                       v=self.v[first - self.key0:last - self.key0 + 1], filler_seed=self.filler_seed,
                       filler_value=self.filler_value, tag=self.tag, extra={"own": pos})

    def rows(self, window: Window) -> list[RowData]:
        """Every row as a reference row."""
        return [self.row(i, window) for i in range(self.seq.rows)]

    def part(self, first_row: int, rows: int) -> "PromptSeq":
        """Rows first_row .. first_row + rows - 1 as a chunk of their own (keys past its end unwritten)."""
        seq = Sequence(start=self.seq.start + first_row, rows=rows, images=self.seq.images)
        last_key = seq.end - self.key0 + 1
        return replace(self, seq=seq, q=self.q[first_row:first_row + rows], k=self.k[:last_key], v=self.v[:last_key])


def key_span(seq: Sequence, window: Window, lead: int = 0) -> Window:
    """A window reaching from the first key of the row `lead` rows before the chunk (as far as the cache still
    holds it when the chunk runs) to the chunk's last row, for drawing the keys."""
    key0 = window.first(max(0, seq.start - lead))
    if window.win > 0:
        key0 = max(key0, min(window.first(seq.start), seq.end - window.ring + 1))
    return Window(win=seq.end - key0 + 1, ring=max(window.ring, seq.end - key0 + 1))


def realistic_sequence(rng: np.random.Generator, shape: Shape, values: Values, window: Window, seq: Sequence,
                       kind_index: int, scale: float) -> PromptSeq:
    """Keys and values as a realistic row of the given kind up to the chunk's end, reaching EARLIER rows back;
    each row's query shares the sequence's direction (so peaks are peaks for every row) with a part of its own, at
    its own RMS."""
    span = key_span(seq, window, lead=EARLIER)
    base = realistic_row(rng, shape, values, span, seq.end, ROW_KINDS[kind_index % len(ROW_KINDS)], scale)
    q0 = base.floats()[0]
    own = scaled_normal(rng, (seq.rows,) + q0.shape, np.ones((seq.rows, shape.q_heads)))
    q = QUERY_SHARE * q0[None] + np.sqrt(1 - QUERY_SHARE**2) * own
    rms = rng.uniform(*values.q_rms, size=(seq.rows, shape.q_heads))
    q *= (rms / np.sqrt(np.mean(q * q, axis=-1)))[..., None]
    return PromptSeq(seq, rn_bits(q, "bf16"), base.first, base.k, base.v, base.filler_seed, tag=base.tag)


def same_query_sequence(seq: Sequence, base: RowData) -> PromptSeq:
    """Every row with the base row's query over the base row's keys up to the chunk's end (mirrors A and B,
    merge stress); the base row reaches at least that far."""
    q = np.broadcast_to(base.q, (seq.rows,) + base.q.shape)
    n = seq.end - base.first + 1
    return PromptSeq(seq, q, base.first, base.k[:n], base.v[:n], base.filler_seed, base.filler_value, base.tag)


def mirror_a_sequence(rng: np.random.Generator, shape: Shape, window: Window, seq: Sequence, chunk: int
                      ) -> PromptSeq:
    """Mirror A (q = 0, every p exactly 1) over a chunk, with one-hot columns on the first and last key of every
    image span and of every row's window besides the chunk edges: a row's output there is 1/n or 0."""
    base = mirrors.mirror_a_row(rng, shape, key_span(seq, window), seq.end, chunk)
    v = base.floats()[2]
    keys = {p for first, last in seq.images for p in (first, last, last + 1, first - 1)}
    keys |= {window.first(int(p)) for p in (seq.start, seq.end)} | {window.first(int(seq.start)) - 1}
    keys = sorted(p - base.first for p in keys if base.first <= p <= seq.end)
    columns = range(shape.head_dim - 1, shape.head_dim - 1 - len(keys), -1)  # the last columns, after the probes
    for key, col in zip(keys, columns):
        v[:, :, col] = 0.0
        v[key, :, col] = 1.0
    return same_query_sequence(seq, replace(base, v=rn_bits(v, "bf16")))


def mirror_c_sequence(rng: np.random.Generator, shape: Shape, window: Window, seq: Sequence, peaked: bool
                      ) -> PromptSeq:
    """Mirror C over a chunk: exact-score keys, and per row an integer query on the base row's dims and signs."""
    base = mirrors.mirror_c_row(rng, shape, key_span(seq, window), seq.end, peaked)
    q0 = base.floats()[0]
    magnitude = rng.integers(1, mirrors.C_MAX + 1, size=(seq.rows,) + q0.shape)
    q = np.sign(q0)[None] * magnitude
    return PromptSeq(seq, rn_bits(q, "bf16"), base.first, base.k, base.v, base.filler_seed, tag=base.tag)
