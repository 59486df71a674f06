"""What a review's pair clock shares between the base's build, the head's and the placebo: one set of buffers where
their calls agree on every input, output and scalar."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kcontract.bench.call import same_buffers
from kcontract.families.rmsnorm.bench import rmsnorm_call

ABI = ("x", "w", "out", "hidden", "eps")


def test_calls_that_agree_on_every_buffer_share_them():
    assert same_buffers(rmsnorm_call(4, 4096, 1e-6, False, ABI), rmsnorm_call(4, 4096, 1e-6, False, ("other",)))


def test_calls_that_differ_in_a_shape_a_scalar_an_output_or_a_fixed_input_do_not():
    call = rmsnorm_call(4, 4096, 1e-6, False, ABI)
    assert not same_buffers(call, rmsnorm_call(8, 4096, 1e-6, False, ABI))
    assert not same_buffers(call, rmsnorm_call(4, 4096, 1e-5, False, ABI))
    assert not same_buffers(call, rmsnorm_call(4, 4096, 1e-6, True, ABI))
    fixed = replace(call, fixed_inputs={"table": np.arange(4, dtype=np.int32)})
    assert same_buffers(fixed, replace(call, fixed_inputs={"table": np.arange(4, dtype=np.int32)}))
    assert not same_buffers(fixed, replace(call, fixed_inputs={"table": np.arange(1, 5, dtype=np.int32)}))
    assert not same_buffers(fixed, replace(call, fixed_inputs={"table": np.arange(4, dtype=np.int64)}))
