"""Window semantics: which keys a row sees, where they live in the cache, and its chunks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    """A sliding window over a ring (win > 0) or no window over a linear cache (win == 0)."""

    win: int
    ring: int

    def first(self, pos: int) -> int:
        """First visible absolute position of a row whose last key is `pos`."""
        return max(0, pos - self.win + 1) if self.win > 0 else 0

    def visible(self, pos: int) -> np.ndarray:
        """Absolute positions a row at `pos` sees, in key order."""
        return np.arange(self.first(pos), pos + 1, dtype=np.int64)

    def stored(self, pos: int) -> np.ndarray:
        """Absolute positions present in the cache when the row runs (the last `ring` written)."""
        return np.arange(max(0, pos - self.ring + 1), pos + 1, dtype=np.int64)

    def slot_of(self, positions: np.ndarray) -> np.ndarray:
        """Cache row of each absolute position."""
        return positions % self.ring

    def check(self, pos: int) -> None:
        """Refuse rows the layout cannot hold."""
        if self.win == 0 and pos >= self.ring:
            raise ValueError(f"row at {pos} does not fit a linear cache of {self.ring} rows")
        if self.win > 0 and self.ring < self.win:
            raise ValueError(f"ring {self.ring} is shorter than window {self.win}")


def chunk_of_key(positions: np.ndarray, first: int, chunk: int) -> np.ndarray:
    """Partial index of each visible key: chunks at absolute positions, counted from the first."""
    return positions // chunk - first // chunk


def max_partials(window: Window, chunk: int) -> int:
    """Partials any row can need under this layout (what a launcher declares as n_part)."""
    span = window.win if window.win > 0 else window.ring
    return (span + chunk - 2) // chunk + 1
