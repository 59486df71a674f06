"""The attention prompt family's YAML fields: sequences of consecutive rows, image spans, cache layouts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kcontract.contract.model import Strict
from kcontract.families.attention.spec import MAX_ROWS, Arithmetic, Cache, Mirror, Shape, Stress, Values


class Sequence(Strict):
    """One sequence's prompt chunk: rows at positions start .. start + rows - 1, and its image spans."""

    start: int = Field(ge=0, le=MAX_ROWS)  # position of the chunk's first row
    rows: int = Field(gt=0, le=8192)
    images: list[tuple[int, int]] = Field(default_factory=list)  # [first, last] absolute positions, inclusive

    @property
    def end(self) -> int:
        """Position of the chunk's last row (every key up to it is in the cache when the chunk runs)."""
        return self.start + self.rows - 1

    @model_validator(mode="after")
    def _spans(self) -> "Sequence":
        previous = -1
        for first, last in self.images:
            if first > last:
                raise ValueError(f"image span [{first}, {last}] ends before it starts: give [first, last], first <= last")
            if first <= previous:
                raise ValueError(f"image spans in increasing order, not overlapping: [{first}, {last}] starts at or "
                                 f"before the end of the span before it ({previous})")
            if first <= self.end and last > self.end:
                raise ValueError(f"image span [{first}, {last}] ends after the chunk's last row {self.end}: its "
                                 f"keys are not in the cache yet; end the chunk at {last} or later")
            previous = last
        return self

    def last_visible(self, pos: int) -> int:
        """A row's last visible key: the end of the image span holding it, else its own position."""
        for first, last in self.images:
            if first <= pos <= last:
                return last
        return pos


class PromptCase(Strict):
    """Sequences of prompt rows over one cache layout; each sequence reads its own cache slot."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    cache: Cache
    sequences: list[Sequence] = Field(min_length=1, max_length=64)

    @model_validator(mode="after")
    def _fits(self) -> "PromptCase":
        for i, seq in enumerate(self.sequences):
            if self.cache.kind == "linear" and seq.end >= self.cache.rows:
                raise ValueError(f"sequence {i}: rows up to {seq.end} do not fit a linear cache of {self.cache.rows}")
            if self.cache.kind == "ring":
                oldest = seq.end - self.cache.rows + 1  # the oldest key the ring still holds
                if seq.start - self.cache.window + 1 < oldest:
                    raise ValueError(f"sequence {i}: a ring of {self.cache.rows} rows has overwritten the window of "
                                     f"its first row {seq.start} by the time the chunk's keys (to {seq.end}) are "
                                     f"written; use a ring of at least {seq.rows + self.cache.window - 1}")
        return self

    @property
    def rows(self) -> int:
        """Rows of the call, all sequences together."""
        return sum(s.rows for s in self.sequences)

    @property
    def images(self) -> bool:
        """Whether any row of the case lies in an image span."""
        return any(first <= s.end and last >= s.start for s in self.sequences for first, last in s.images)


class PromptSpec(Strict):
    """Everything an attention prompt entry declares beyond the generic fields."""

    abi: Literal["split", "fused"] = "split"  # partials then a merge (two launches), or one launch (docs 7)
    shape: Shape
    arithmetic: Arithmetic = Arithmetic()
    values: Values = Values()
    cases: list[PromptCase] = Field(min_length=1)
    stress: Stress = Stress()
    mirror: Mirror = Mirror()
    scale: float | None = Field(default=None, ge=2.0**-60, le=2.0**10)  # default fp32(1/sqrt(head_dim))

    @model_validator(mode="after")
    def _abi_order(self) -> "PromptSpec":
        a = self.arithmetic
        if self.abi == "fused" and (not a.merges_online or a.partials != "hidden"):
            raise ValueError("abi: fused is one launch that merges online and writes no partials: it needs "
                             f"sum_order: online_mma and partials: hidden, given: sum_order: {a.sum_order}, "
                             f"partials: {a.partials}")
        if self.abi == "split" and a.merges_online:
            raise ValueError(f"sum_order: {a.sum_order} is the fused kernel's order (one launch, an online merge): it "
                             "needs abi: fused")
        return self

    @model_validator(mode="after")
    def _unique_cases(self) -> "PromptSpec":
        names = [c.name for c in self.cases]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"case names unique within the entry, given twice: {', '.join(twice)}")
        return self
