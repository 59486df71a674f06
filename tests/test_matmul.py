"""The matmul family: fp32 evaluations in many orders and tensor-core k-step chains stay inside the range, the
numpy double passes its contract and its planted faults (split-K from M, a merge order from M, a K tail dropped,
a bf16 accumulator) go red at their gates."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kcontract.families.matmul.reference import ranges
from kcontract.families.matmul.spec import Arithmetic
from kcontract.numerics import expected_bounds, round_to
from tests.oracles.mma_model import chain
from tests.helpers.cli import kcontract_in_process, no_traceback

CONTRACT = "tests/contracts/matmul.yaml"


def fp32_orders(a: np.ndarray, b: np.ndarray, rng: np.random.Generator):
    """fp32 results of a b^T: BLAS, pairwise, sequential in a random order, and in four pieces added in order."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    yield a32 @ b32.T
    prods = a32[:, None, :] * b32[None, :, :]
    yield prods.sum(axis=2, dtype=np.float32)
    seq = np.zeros(prods.shape[:2], np.float32)
    for i in rng.permutation(a.shape[1]):
        seq = (seq + prods[:, :, i]).astype(np.float32)
    yield seq
    total = np.zeros_like(seq)
    for piece in np.array_split(np.arange(a.shape[1]), 4):
        total = (total + prods[:, :, piece].sum(axis=2, dtype=np.float32)).astype(np.float32)
    yield total


def mma_split(a: np.ndarray, b: np.ndarray, splits: int) -> np.ndarray:
    """Tensor-core k-step chains (the H200's measured model) over each of `splits` pieces, added in fp32."""
    k = a.shape[1]
    total = np.zeros((a.shape[0], b.shape[0]), np.float32)
    for piece in np.array_split(np.arange(k), splits):
        pad = -len(piece) % 16
        ap = np.pad(a[:, piece], ((0, 0), (0, pad)))
        bp = np.pad(b[:, piece], ((0, 0), (0, pad)))
        steps = ap.shape[1] // 16
        sa = np.broadcast_to(ap.reshape(a.shape[0], 1, steps, 16), (a.shape[0], b.shape[0], steps, 16))
        sb = np.broadcast_to(bp.reshape(1, b.shape[0], steps, 16), (a.shape[0], b.shape[0], steps, 16))
        part = chain(np.zeros((a.shape[0], b.shape[0]), np.float32), sa, sb)
        total = (total + part).astype(np.float32)
    return total


def draw(seed: int, m: int, k: int, n: int):
    rng = np.random.default_rng(seed)
    a = round_to(rng.standard_normal((m, k)) * 10.0 ** rng.uniform(-2, 2, size=(m, 1)), "bf16")
    b = round_to(rng.standard_normal((n, k)) / np.sqrt(k), "bf16")
    a[0, : k // 2] += 300.0  # a row whose halves cancel across magnitudes
    b[0, k // 2: 2 * (k // 2)] = -b[0, : k // 2]
    return rng, round_to(a, "bf16"), b


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31), k=st.sampled_from([1, 17, 256, 1000]))
def test_every_fp32_order_lies_in_the_range(seed, k):
    rng, a, b = draw(seed, 5, k, 7)
    for out in ("fp32", "bf16"):
        center, radius = ranges(a, b, Arithmetic(out=out))
        lo, hi = expected_bounds(center, radius, out)
        for got in fp32_orders(a, b, rng):
            value = round_to(got.astype(np.float64), out)
            assert np.all((value >= lo) & (value <= hi))


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31), k=st.sampled_from([16, 100, 512]), splits=st.sampled_from([1, 2, 4]))
def test_tensor_core_chains_per_split_lie_in_the_mma_range(seed, k, splits):
    _, a, b = draw(seed, 3, k, 4)
    center, radius = ranges(a, b, Arithmetic(accumulate="mma_bf16", split_k=splits, out="fp32"))
    lo, hi = expected_bounds(center, radius, "fp32")
    got = mma_split(a, b, splits).astype(np.float64)
    assert np.all((got >= lo) & (got <= hi))


def test_integer_rows_are_decided_exactly():
    rng = np.random.default_rng(3)
    a = rng.integers(-16, 17, size=(4, 4096)).astype(np.float64)
    b = rng.integers(-16, 17, size=(6, 4096)).astype(np.float64)
    center, radius = ranges(a, b, Arithmetic(accumulate="mma_bf16", split_k=4))
    assert not radius.any() and np.array_equal(center, a @ b.T)


def test_the_numpy_double_passes_and_its_faults_go_red():
    done = kcontract_in_process("run", "--contract", CONTRACT, "--jobs", "2")
    no_traceback(done)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "SUMMARY 2 kernels: 2 pass gates 1-4, 0 fail, 0 known findings; 5 controls: 5 red as planted, 0 missed; "
        "0 limit problems")


def test_issued_tensor_work_counts_each_k_tile_once_however_the_pieces_fall():
    from kcontract.families.matmul.bench import matmul_call

    launch = type("Launch", (), {"grid": (32, 1, 3)})()
    call = matmul_call(5, 4096, 2048, Arithmetic(accumulate="mma_bf16", split_k=3, k_tile=64), [launch], 64, 64)
    assert call.mma_flops == 2 * (32 * 64) * 64 * 4096  # pieces of 22, 22 and 20 k tiles: 64 in all, not 66
    tail = matmul_call(5, 600, 120, Arithmetic(accumulate="mma_bf16", split_k=3, k_tile=64), [launch], 64, 64)
    assert tail.mma_flops == 2 * (32 * 64) * 64 * 640  # ten k tiles, the last padded with zeros
