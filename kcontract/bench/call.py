"""A benchmark call's buffers: random inputs made on the device, fixed inputs copied, outputs poisoned."""

from __future__ import annotations

import numpy as np

from kcontract.problem import BenchCall


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


def same_buffers(call: BenchCall, other: BenchCall) -> bool:
    """Both calls' buffers would hold the same values: the same random input shapes and RMS, fixed inputs, outputs
    and scalars (so one set of buffers serves both)."""
    fixed = call.fixed_inputs.keys() == other.fixed_inputs.keys() and all(
        np.array_equal(v, other.fixed_inputs[k]) and np.asarray(v).dtype == np.asarray(other.fixed_inputs[k]).dtype
        for k, v in call.fixed_inputs.items())
    return (fixed and call.random_inputs == other.random_inputs and call.outputs == other.outputs
            and call.scalars == other.scalars)
