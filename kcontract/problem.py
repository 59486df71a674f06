"""The objects families, launchers and gates exchange: problems, expectations, variant runs, launch shapes and
benchmark calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np

from kcontract.errors import UsageError
from kcontract.numerics.xp import to_device


@dataclass(frozen=True)
class OutputSpec:
    """An output buffer the launcher allocates and poisons (NaN in its format) before every launch."""

    shape: tuple[int, ...]
    fmt: str  # "bf16", "fp16" or "fp32"


@dataclass(frozen=True)
class LaunchShape:
    """How one kernel symbol role is launched: threads per block and dynamic shared memory in bytes (one value, or
    {sm: bytes} where it differs per target SM)."""

    role: str  # the kernel reference's symbol role, e.g. "partials"
    threads: int
    dynamic_smem: int | dict[str, int] = 0

    def smem_on(self, sm: str) -> int:
        """The bytes a launch on `sm` gives."""
        return smem_on(self.dynamic_smem, sm)


def smem_on(dynamic_smem: int | dict[str, int], sm: str) -> int:
    """Dynamic shared memory on `sm`: the one value, or that SM's (sm_90a reads sm_90's) of a per-SM launch."""
    if isinstance(dynamic_smem, int):
        return dynamic_smem
    for name in (sm, sm.rstrip("af")):
        if name in dynamic_smem:
            return dynamic_smem[name]
    raise UsageError(f"the launch gives dynamic shared memory per SM ({', '.join(dynamic_smem)}) and none for {sm}: "
                     f"add {sm} to the contract's `targets`")


@dataclass(frozen=True)
class TensorMap:
    """A tensor map (TMA descriptor) of a 2D input, encoded by the CUDA launcher once the input is on the device and
    passed by value: the box one copy moves, in elements (innermost first), and the shared-memory swizzle."""

    input: str  # the input it maps, a C-contiguous [rows, inner] buffer
    box: tuple[int, int]  # (inner, rows) elements per copy
    fmt: str = "bf16"  # the elements' format: "bf16", "fp16" or "fp32"
    swizzle: int = 128  # bytes: 0 (none), 32, 64 or 128


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch of a call: which symbol role, its grid, and its arguments in parameter order."""

    role: str  # the kernel reference's symbol role, e.g. "partials"
    grid: tuple[int, int, int]
    args: tuple[str, ...]  # names of inputs, outputs, scalars and tensor maps, in the kernel's parameter order
    tensor_maps: dict[str, TensorMap] = field(default_factory=dict)  # args that are tensor maps of inputs


@dataclass
class Assembled:
    """An input buffer given as a fill value and blocks written over it, built where the kernel runs.

    Host memory holds only the blocks (views of the rows' data), never the fill: a long cache slot that a
    short row uses costs only that row's data, and a call declaring a longer cache costs nothing more.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    fill: int
    blocks: list[tuple[int, slice | np.ndarray, np.ndarray]]  # (index on axis 0, rows on axis 1, data), in order

    @property
    def nbytes(self) -> int:
        """Bytes of the built buffer."""
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    def materialise(self, xp=np):
        """The whole buffer, built with numpy or CuPy (there the blocks are copied straight to the device)."""
        return self.write_blocks(xp.full(self.shape, self.fill, dtype=self.dtype), xp)

    def write_blocks(self, out, xp=np):
        """Write the blocks over `out`, a buffer of this shape and dtype holding the fill; returns out."""
        for first, rows, data in self.blocks:
            out[first, rows if isinstance(rows, slice) else xp.asarray(rows)] = built(data, xp)
        return out

    def clear_blocks(self, out) -> None:
        """Put the fill back where the blocks were written, so `out` can hold another buffer's blocks."""
        for first, rows, _ in self.blocks:
            out[first, rows] = self.fill


def built(value, xp=np):
    """An input as an array of xp (numpy or CuPy): Assembled inputs are built, host arrays copied."""
    return value.materialise(xp) if isinstance(value, Assembled) else to_device(value, xp)


@dataclass
class Problem:
    """One kernel call: ABI input buffers, outputs to allocate, typed scalars, launches and a label."""

    label: str  # the call, as reports name it: "linear_3000" or "linear_3000/batch7_last_row0"
    inputs: dict[str, np.ndarray | Assembled]  # host arrays in ABI dtype (bf16 and fp16 as uint16 bit patterns)
    outputs: dict[str, OutputSpec]
    scalars: dict[str, np.generic]  # kernel scalars by ABI name, already in their C type (np.int32, np.float32)
    launches: tuple[KernelLaunch, ...] = ()  # what a compiled kernel runs, in order (python kernels ignore it)
    fetch: tuple[str, ...] | None = None  # outputs a GPU launcher copies back (None: all), so workspaces stay put

    def fetched(self, outputs: dict) -> dict:
        """The outputs to copy back."""
        return {name: out for name, out in outputs.items() if self.fetch is None or name in self.fetch}


@dataclass
class Expected:
    """Per-element allowed range of one output, already rounded to the output format."""

    output: str  # which output buffer
    fmt: str  # "bf16", "fp16" or "fp32"
    lo: np.ndarray  # float64 values of RN(lo) in fmt, output shape
    hi: np.ndarray  # float64 values of RN(hi) in fmt
    center: np.ndarray  # float64 reference before output rounding
    axes: tuple[str, ...]  # coordinate names, one per axis, e.g. ("row", "unit", "col")
    mask: np.ndarray | None = None  # which elements are checked (None: all), e.g. the partial slots a row uses


@dataclass
class Reference:
    """What a checked problem's outputs must satisfy, and facts about it for the report."""

    expected: list[Expected]
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Checked:
    """A problem and what its output must satisfy; the unit of the range gates (1, 3, 4).

    `reference` is a Reference or the function that computes it: the gate asks for it after the launch,
    through the reference cache, so a warm run never recomputes it.
    """

    case: str
    problem: Problem
    reference: Reference | Callable[[], Reference]
    notes: dict[str, Any] = field(default_factory=dict)  # facts about the inputs for the report
    causes: tuple[str, ...] = ()  # what a failure on these inputs means, in place of the family's usual causes

    def compute_reference(self) -> Reference:
        """The reference, computed now if it is a function."""
        return self.reference if isinstance(self.reference, Reference) else self.reference()


@dataclass
class Variant:
    """A run that contains the base rows somewhere else: row_map[base_row] = row in this run."""

    label: str
    problem: Problem
    row_map: dict[int, int]
    concurrent_with: Problem | None = None  # run at the same time as this problem, if the launcher can


@dataclass
class InvarianceSet:
    """A base run and its variant runs whose mapped rows must be bit-equal to the base's."""

    case: str
    base: Problem
    outputs: tuple[str, ...]  # outputs compared, first axis is the row
    variants: Iterable[Variant]  # built one at a time as the gate asks for it (iterated once)
    axes: tuple[str, ...] = ("row",)  # coordinate names of an output's axes, for reports
    # order probes: how many of the plausible orders of a sum the set's inputs tell apart, of how many, and the
    # names of those another order matches (the family replays them); None where the set holds no probes
    orders: tuple[int, int, tuple[str, ...]] | None = None


@dataclass
class BenchCall:
    """One timed call of `kcontract bench`: shapes of its random bf16 inputs, small fixed inputs, outputs, scalars,
    launches, the work it must do, and optionally a peer implementation timed on the same call."""

    label: str  # the call's shape as tables print it, e.g. "d512 16/1"
    size: dict[str, int]  # what the call's size is, by the family's names, e.g. {"rows": 4, "n": 131072}
    random_inputs: dict[str, tuple[tuple[int, ...], float]]  # name -> (shape, RMS) of random bf16 values
    fixed_inputs: dict[str, np.ndarray]
    outputs: dict[str, OutputSpec]
    scalars: dict[str, np.generic]
    launches: tuple[KernelLaunch, ...]
    bytes: int  # the fewest bytes the call must move (inputs read once, workspace written and read, output)
    flops: int = 0  # useful flops
    mma_flops: int = 0  # flops the kernel issues on tensor cores; 0: none counted
    bound: str = "memory"  # the ceiling it is judged against: "memory" (the read ceiling) or "compute" (mma)
    peer: Callable[[Any, int], tuple[float | None, str]] | None = None  # (timer, repeat) -> (us or None, name or why)

    @property
    def size_text(self) -> str:
        """`rows 4, n 131072`."""
        return ", ".join(f"{k} {v}" for k, v in self.size.items())
