"""The matmul family's YAML fields: the declared accumulation, the output format and the cases."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from kcontract.contract.model import Strict

MAX_K = 1 << 16  # every exact-sum row stays below 2^24 at this depth


class Arithmetic(Strict):
    """What the range allows for: fp32 sums in any order, or tensor-core k-steps chained per split, the splits of
    K (fixed, never chosen from M) added in fp32."""

    accumulate: Literal["fp32", "mma_bf16"] = "fp32"
    split_k: int = Field(default=1, ge=1, le=64)  # contiguous pieces of K summed apart, then added in fp32
    k_tile: int = Field(default=64, ge=16, le=1024, multiple_of=16)  # pieces are whole tiles of this many K
    out: Literal["bf16", "fp32"] = "bf16"

    def pieces(self, k: int) -> list[tuple[int, int]]:
        """The split's pieces of K, [lo, hi): the ceil(K / k_tile) tiles cut into split_k runs of
        ceil(tiles / split_k) (the last ones shorter or empty)."""
        tiles = -(-k // self.k_tile)
        per = -(-tiles // self.split_k)
        bounds = [min(k, min(tiles, p * per) * self.k_tile) for p in range(self.split_k + 1)]
        return list(zip(bounds[:-1], bounds[1:]))

    def piece_terms(self, k: int) -> int:
        """Terms a piece's chain may take, zeros past K included: its whole k tiles."""
        tiles = -(-k // self.k_tile)
        return -(-tiles // self.split_k) * self.k_tile

    def issued_terms(self, k: int) -> int:
        """Terms the tensor cores take over all pieces, zeros past K included: every k tile lies in one piece."""
        return -(-k // self.k_tile) * self.k_tile


class Case(Strict):
    """One shape: M token rows, K the reduction, N the outputs per row."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    m: int = Field(gt=0, le=16384)
    k: int = Field(gt=0, le=MAX_K)
    n: int = Field(gt=0, le=65536)


class MatmulSpec(Strict):
    """The entry's fields beside the generic ones."""

    arithmetic: Arithmetic = Arithmetic()
    # how a compiled kernel takes a and b: tensor maps (a_map, b_map: the copy engine's boxes, grid z one block per
    # piece of K) or plain pointers (a, b: a program computes its tile over every piece, grid z 1)
    abi: Literal["tensor_maps", "pointers"] = "tensor_maps"
    # which kernel symbol (its tile) a call of M rows launches: from each key's number of rows on, its symbol; the
    # tiles change which block computes an output, never the declared order, so gate 2 runs batches across every edge
    schedule: dict[Annotated[int, Field(ge=1, le=16384)], Annotated[str, Field(pattern=r"^[A-Za-z_]\w*$")]] = {
        1: "matmul"}
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _splits_fit(self) -> "MatmulSpec":
        for case in self.cases:
            if case.k < self.arithmetic.split_k:
                raise ValueError(f"case {case.name}: K {case.k} below split_k {self.arithmetic.split_k}")
        if 1 not in self.schedule:
            first = f"its first key is {min(self.schedule)}" if self.schedule else "it names none"
            raise ValueError(f"schedule: a symbol from 1 row on ({first})")
        return self

    def role(self, rows: int) -> str:
        """The symbol a call of `rows` rows launches: the schedule's at the largest key not above it."""
        return self.schedule[max(at for at in self.schedule if at <= rows)]
