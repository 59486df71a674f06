"""p times V on tensor cores under the order-free ranges: the H200 k-step model of a prompt kernel's chunk sums
(short chunks, chunks across k-step edges, whole chunks) lies inside `pv: mma_bf16`'s bound, and outside the IEEE
fp32 bound that a kernel without the declaration would get (as a mirror-C row did on the H200)."""

from __future__ import annotations

import numpy as np
import pytest

from kcontract.families.attention.bounds import decode_row_range, pv_parts
from kcontract.families.attention.partials import partial_ranges
from kcontract.families.attention.spec import Arithmetic
from kcontract.families.attention.tensorcore import replay_scores
from kcontract.families.attention.window import chunk_of_key
from kcontract.numerics import U32, expected_bounds, gamma, kstep, kstep_sum_error, round_to, touched_steps

D, G, CHUNK = 64, 4, 256


def arithmetic(pv: str, prob_round: str) -> Arithmetic:
    return Arithmetic(score="mma_bf16", score_order="replay", pv=pv, prob_round=prob_round)


def emulated_chunks(q, k, v, first, pos, scale, p_bf16, p_low=False):
    """[G, nch, D] o_c and [G, D] bf16 out of a kernel summing p v in k-steps of 16 aligned keys (fp32 p as three
    bf16 parts), merged by fp32 fma chains in chunk order; p_low: an expf one ulp low (within its 2 ulps)."""
    s = replay_scores(q, k[:, 0, :], scale)
    f32 = np.float32
    os_, ms, ls = [], [], []
    for c in range(first // CHUNK, pos // CHUNK + 1):
        keys = [j for j in range(CHUNK) if first <= CHUNK * c + j <= pos]
        idx = [CHUNK * c + j - first for j in keys]
        m = s[:, idx].max(axis=1)
        p = np.zeros((G, CHUNK))
        p[:, keys] = np.exp((s[:, idx] - m[:, None]).astype(f32)).astype(f32)  # numpy's expf: within 1 ulp
        if p_low:
            p = np.where(p < 1, np.nextafter(p.astype(f32), f32(0)), p)
        if p_bf16:
            p = round_to(p, "bf16")
        vv = np.zeros((CHUNK, D))
        vv[keys] = v[idx, 0]
        hi = round_to(p, "bf16")
        mid = round_to(p - hi, "bf16")
        parts = [p] if p_bf16 else [hi, mid, p - hi - mid]
        acc = np.zeros((G, D))
        for s0 in range(0, CHUNK, 16):
            for part in parts:
                a = np.broadcast_to(part[:, None, s0:s0 + 16], (G, D, 16))
                b = np.broadcast_to(vv[s0:s0 + 16].T[None], (G, D, 16))
                acc = kstep(acc, a, b)
        os_.append(acc), ms.append(m), ls.append(p.sum(axis=1, dtype=np.float32))
    ms, ls = np.stack(ms, 1), np.stack(ls, 1)
    big_m = ms.max(axis=1, keepdims=True)
    f = np.exp((ms - big_m).astype(f32)).astype(f32)
    big_l = (f * ls).sum(axis=1, dtype=np.float32)
    big_o = sum(f[:, c, None] * os_[c].astype(f32) for c in range(len(os_))).astype(f32)
    return np.stack(os_, 1), round_to((big_o / big_l[:, None]).astype(np.float64), "bf16")


def row(rng, first, pos):
    """Exact integer scores (mirror C's kind), positive v: every k-step's truncation points one way."""
    n = pos - first + 1
    q = np.zeros((G, D))
    q[:, :16] = rng.integers(-127, 128, size=(G, 16))
    k = rng.integers(-127, 128, size=(n, 1, D)).astype(np.float64)
    v = round_to(1.0 + rng.random((n, 1, D)), "bf16")
    return q, k, v, 3.0 * 2.0**-16


@pytest.mark.parametrize("p_low", [False, True])
@pytest.mark.parametrize("p_round", ["none", "bf16"])
@pytest.mark.parametrize("first, pos", [(100, 513), (240, 529), (0, 767)])
def test_tensor_core_chunk_sums_lie_inside_the_pv_mma_bound(p_round, first, pos, p_low):
    rng = np.random.default_rng(first + pos)
    q, k, v, scale = row(rng, first, pos)
    o, out = emulated_chunks(q, k, v, first, pos, scale, p_round == "bf16", p_low)
    chunks = chunk_of_key(np.arange(first, pos + 1), first, CHUNK)
    mma = partial_ranges(q, k, v, chunks, scale, arithmetic("mma_bf16", p_round), exact_scores=True).o
    assert np.all((mma[0] <= o) & (o <= mma[1]))
    rng_out = decode_row_range(q, k, v, chunks, scale, arithmetic("mma_bf16", p_round), exact_scores=True)
    lo, hi = expected_bounds(rng_out.center, rng_out.radius, "bf16")
    assert np.all((lo <= out) & (out <= hi))


def test_a_two_key_chunk_falls_below_ieee_and_inside_the_pv_mma_bound():
    """A two-key chunk (p = 0.33294523 and 1, v = 0.0395508 and 2.140625): its mid and lo parts' k-steps
    truncate 2 ulps below the exact sum, under IEEE fp32's any-order bound (the model gives the H200's bits)."""
    p = np.array([np.float32(0.33294523), 1.0])
    v = np.array([0.03955078125, 2.140625])
    hi = round_to(p, "bf16")
    mid = round_to(p - hi, "bf16")
    acc = np.zeros(1)
    for part in (hi, mid, p - hi - mid):
        acc = kstep(acc, np.pad(part, (0, 14))[None], np.pad(v, (0, 14))[None])
    assert np.float32(acc[0]).view(np.uint32) == 0x4009D7BE
    exact, total = float(p @ v), float(np.abs(p) @ np.abs(v))
    ieee = float(gamma(2, U32)) * total
    assert acc[0] < round_to(np.array(exact - ieee), "fp32")
    mma = kstep_sum_error(2, CHUNK, pv_parts("none")) * total
    assert exact - mma <= acc[0] <= exact + mma


def test_relative_error_counts_parts_and_touched_steps():
    assert touched_steps(2, CHUNK) == 2 and touched_steps(256, CHUNK) == 16 and touched_steps(0, CHUNK) == 0
    assert kstep_sum_error(2, CHUNK, pv_parts("none")) == 3 * kstep_sum_error(2, CHUNK, pv_parts("bf16"))
    assert pv_parts("bf16_numerator") == 1


@pytest.mark.parametrize("fields, words", [
    ({"sum_order": "split_mma", "pv": "fp32"}, "it needs pv: mma_bf16"),
    ({"sum_order": "split_chain", "pv": "mma_bf16"}, "it needs pv: fp32"),
    ({"pv": "mma_bf16", "chunk": 100}, "a multiple of 16"),
])
def test_pv_declarations_that_contradict_are_refused(fields, words):
    with pytest.raises(ValueError, match=words):
        Arithmetic(score="mma_bf16", score_order="replay", **fields)

