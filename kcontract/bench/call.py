"""A benchmark call: a family's kernel call at a size, with random inputs made on the device."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kcontract.problem import KernelLaunch, OutputSpec


@dataclass
class BenchCall:
    """One timed call: shapes of its random bf16 inputs, small fixed inputs, outputs, scalars and launches."""

    label: str  # e.g. "d512 16/1 x 4 rows"
    rows: int
    keys: int
    random_inputs: dict[str, tuple[tuple[int, ...], float]]  # name -> (shape, RMS) of random bf16 values
    fixed_inputs: dict[str, np.ndarray]
    outputs: dict[str, OutputSpec]
    scalars: dict[str, np.generic]
    launches: tuple[KernelLaunch, ...]
    bytes: int  # the fewest bytes the call must move (inputs read once, workspace written and read, output)
    flops: int = 0  # useful flops: visible keys only
    mma_flops: int = 0  # flops the kernel issues on tensor cores (whole tiles, every part of p); 0: none counted
    sdpa: dict = field(default_factory=dict)  # the same call for torch: batch, q_heads, kv_heads, keys, head_dim


def random_bf16(cupy, shape: tuple[int, ...], rms: float, seed: int):
    """Random normal values rounded to bf16 (RN-even on the bits), as uint16 bit patterns on the device."""
    rng = cupy.random.default_rng(seed)
    x = (rng.standard_normal(shape, dtype=cupy.float32) * cupy.float32(rms)).view(cupy.uint32)
    return ((x + cupy.uint32(0x7FFF) + ((x >> 16) & cupy.uint32(1))) >> 16).astype(cupy.uint16)


def materialise(cupy, call: BenchCall, copy: int) -> dict:
    """Device buffers for one copy of the call's inputs and outputs (outputs poisoned), plus its scalars."""
    from kcontract.launch.cuda import poisoned

    values = {name: random_bf16(cupy, shape, rms, seed=1000 * copy + i)
              for i, (name, (shape, rms)) in enumerate(sorted(call.random_inputs.items()))}
    values |= {name: cupy.asarray(array) for name, array in call.fixed_inputs.items()}
    values |= {name: poisoned(cupy, spec) for name, spec in call.outputs.items()}
    return values | dict(call.scalars)
