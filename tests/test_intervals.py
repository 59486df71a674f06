"""The core's interval numerics: fp32 emulation, the k-step model and its bounds, exact sums and output ranges."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kcontract.numerics import (
    U32,
    abs_sum_exact,
    add32,
    bf16_parts,
    chained_dot_error,
    div_interval32,
    exact_quotient_bounds,
    exact_sum_limit,
    exp_interval32,
    exp_log_error,
    expected_bounds,
    fma32,
    fp32_at_least,
    fp32_at_most,
    gamma,
    kstep_dots,
    kstep_interval,
    kstep_sum_error,
    next_up,
    path_roundings,
    round_to,
    sums_exact,
    to_bits,
    touched_steps,
    ulp_distance,
    ulp_steps,
)
from tests.oracles.mma_model import LITERATURE, chain, mma_sum

F32 = np.float32


def fp32_values(rng, n, spread=20):
    """n random fp32 values (as float64) of either sign over 2 * spread binades."""
    return F32(rng.standard_normal(n) * np.exp2(rng.integers(-spread, spread, n))).astype(np.float64)


def bf16(x):
    return round_to(np.asarray(x, float), "bf16")


# --- fp32 ---------------------------------------------------------------------------------------------------------

def test_add32_and_fma32_round_once_and_bound_intervals():
    rng = np.random.default_rng(11)
    a, b, c = (fp32_values(rng, 20_000) for _ in range(3))
    assert np.array_equal(add32(a, b), (F32(a) + F32(b)).astype(np.float64))
    a_lo, a_hi = np.minimum(a, b), np.maximum(a, b)  # operand intervals; a point inside each
    c_lo, c_hi = np.minimum(c, -c), np.maximum(c, -c)
    t = rng.random(a.size)
    a_in = F32(a_lo + t * (a_hi - a_lo)).astype(np.float64).clip(a_lo, a_hi)
    c_in = F32(c_lo + t * (c_hi - c_lo)).astype(np.float64).clip(c_lo, c_hi)
    got = (F32(a_in) + F32(c_in)).astype(np.float64)
    assert np.all((add32(a_lo, c_lo) <= got) & (got <= add32(a_hi, c_hi)))  # monotone: the ends bound it
    assert np.array_equal(fma32(a, b, np.zeros_like(c)), (F32(a) * F32(b)).astype(np.float64))
    x = bf16(rng.standard_normal(a.size))  # fma32 is monotone in its addend and, by x's sign, in its factor
    x_lo = np.where(x >= 0, a_lo, a_hi)
    x_hi = np.where(x >= 0, a_hi, a_lo)
    inside = fma32(a_in, x, c_in)
    assert np.all((fma32(x_lo, x, c_lo) <= inside) & (inside <= fma32(x_hi, x, c_hi)))


def test_directed_rounding_to_fp32_is_tight():
    rng = np.random.default_rng(12)
    x = rng.standard_normal(50_000) * np.exp2(rng.integers(-60, 60, 50_000))
    lo, hi = fp32_at_most(x), fp32_at_least(x)
    assert np.all((lo <= x) & (x <= hi)) and np.array_equal(round_to(lo, "fp32"), lo)
    assert np.array_equal(round_to(hi, "fp32"), hi)
    assert np.all((lo == hi) == (round_to(x, "fp32") == x))
    assert np.all((lo == hi) | (next_up(lo, "fp32") == hi))


def test_ulp_steps_and_the_exp_interval():
    rng = np.random.default_rng(13)
    x = F32(-rng.random(5000) * 80).astype(np.float64)
    lo, hi = ulp_steps(np.exp(x), 3)
    assert np.all(ulp_distance(to_bits(hi, "fp32"), to_bits(lo, "fp32"), "fp32") == 6)
    e_lo, e_hi = exp_interval32(x, 3)
    assert np.array_equal(e_lo, lo) and np.array_equal(e_hi, hi)
    expf = np.exp(F32(x))  # numpy's expf: within an ulp of exp
    assert np.all((e_lo <= expf) & (expf <= e_hi))
    ends = exp_interval32(np.array([0.0, -np.inf]), 3)
    assert np.array_equal(ends[0], [1.0, 0.0]) and np.array_equal(ends[1], [1.0, 0.0])
    assert ulp_steps(np.array([0.0]), 2)[0][0] == 0.0  # the lower end stops at 0


def test_the_quotient_interval_holds_every_fp32_quotient():
    rng = np.random.default_rng(14)
    n1, n2 = fp32_values(rng, 20_000), fp32_values(rng, 20_000)
    d1, d2 = (np.abs(fp32_values(rng, 20_000)) + 2.0**-30 for _ in range(2))
    d1, d2 = round_to(d1, "fp32"), round_to(d2, "fp32")
    lo, hi = div_interval32(np.minimum(n1, n2), np.maximum(n1, n2), np.minimum(d1, d2), np.maximum(d1, d2))
    for n, d in ((n1, d1), (n2, d2), (n1, d2), (n2, d1)):
        q = (F32(n) / F32(d)).astype(np.float64)
        assert np.all((lo <= q) & (q <= hi))
    same = div_interval32(n1, n1, d1, d1)
    assert np.array_equal(same[0], same[1]) and np.array_equal(same[0], (F32(n1) / F32(d1)).astype(np.float64))


# --- the k-step model and its bounds -----------------------------------------------------------------------------

def test_dots_over_any_grouping_match_the_chained_model():
    rng = np.random.default_rng(21)
    a = bf16(rng.standard_normal((3, 64)) * np.exp2(rng.integers(-8, 8, (3, 64))))
    b = bf16(rng.standard_normal((200, 64)))
    groups = rng.permutation(64).reshape(4, 16)
    want = np.stack([chain(np.zeros(200, F32), np.broadcast_to(a[i][groups], (200, 4, 16)), b[:, groups], LITERATURE)
                     for i in range(3)]).astype(np.float64)
    assert np.array_equal(kstep_dots(a, b, groups), want)
    exact = a @ b.T
    big = 0.5 * (np.abs(a) @ np.abs(b).T + np.abs(exact))  # every partial sum is at most this
    assert np.all(np.abs(want - exact) <= chained_dot_error(64) * big)


@pytest.mark.parametrize("fmt", ["bf16", "fp32"])
def test_the_kstep_interval_holds_the_model_for_every_operand_inside(fmt):
    """Operands a anywhere in their intervals, split into bf16 parts, summed in k-steps by the model (oracle)."""
    rng = np.random.default_rng(22 if fmt == "bf16" else 23)
    parts = bf16_parts(fmt)
    n, steps = 3000, 4
    ends = [round_to(rng.random((n, steps, 16)) * np.exp2(rng.integers(-12, 2, (n, steps, 16))), fmt) for _ in range(2)]
    ends[1][: n // 2] = ends[0][: n // 2]  # half the rows: points, where only the k-steps' own error widens
    a_lo, a_hi = np.minimum(*ends), np.maximum(*ends)
    a = round_to(a_lo + rng.random(a_lo.shape) * (a_hi - a_lo), fmt).clip(a_lo, a_hi)
    b = bf16(rng.standard_normal((n, steps, 16)))
    lo = hi = acc = np.zeros(n)
    for s in range(steps):
        split, rest = [], a[:, s]
        for _ in range(parts):
            split.append(bf16(rest))
            rest = rest - split[-1]
        assert not rest.any()  # the parts hold a exactly
        for part in split:
            acc = mma_sum(F32(acc), part, b[:, s], LITERATURE).astype(np.float64)
        lo, hi = kstep_interval(lo, hi, a_lo[:, s], a_hi[:, s], b[:, s], parts, axis=-1)
        assert np.all((lo <= acc) & (acc <= hi)), s
    sums = np.abs(a * b).sum(axis=(1, 2))
    assert np.all(np.abs(acc - (a * b).sum(axis=(1, 2))) <= kstep_sum_error(steps * 16, steps * 16, parts) * sums)


def test_a_kstep_whose_terms_lose_no_bit_is_a_point_and_the_model_agrees():
    """One large term among zeros, or small multiples of 1/16: no cut or truncation loses a bit, so the interval
    is the exact sum; a term off the grid of the largest one's binade keeps the interval wide."""
    rng = np.random.default_rng(24)
    n = 400
    a = bf16(rng.integers(-16, 17, (n, 16)) / 16.0)
    a[: n // 2] = 0.0
    a[: n // 2, 3] = 2.0**22 * rng.choice([-1, 1], n // 2)  # the large value alone in its k-step
    b = np.ones((n, 16))
    acc = np.where(np.arange(n) % 3 == 0, 0.0, 0.5 * rng.integers(-64, 65, n))  # sums fp32 values at 2^22 too
    lo, hi = kstep_interval(acc, acc, a, a, b, 1, axis=-1)
    model = mma_sum(F32(acc), a, b, LITERATURE).astype(np.float64)
    assert np.array_equal(lo, hi) and np.array_equal(lo, model) and np.array_equal(lo, acc + a.sum(axis=1))
    a[n // 2:, 5] = 2.0**22  # a large term beside small ones: some are cut, so no point
    lo, hi = kstep_interval(acc, acc, a, a, b, 1, axis=-1)
    assert np.all(lo[n // 2:] < hi[n // 2:])
    model = mma_sum(F32(acc), a, b, LITERATURE).astype(np.float64)
    assert np.all((lo <= model) & (model <= hi))


@pytest.mark.parametrize("top", [1.0, 1 - 2.0**-8, 2.0**20 * (1 - 2.0**-8), 2.0**-90, -(2.0**-60)])
def test_the_exact_steps_grid_is_the_largest_terms_binade(top):
    """Terms at +-2^(E - 25) beside the largest, in its binade 2^E, lose no bit (a point); at +-2^(E - 26) they
    are cut (no point), whether the largest is a power of two or just below one."""
    e = math.frexp(top)[1] - 1
    for unit, point in ((2.0 ** (e - 25), True), (2.0 ** (e - 26), False)):
        a = np.zeros((1, 16))
        a[0, :3] = top, unit, -unit  # their sum is the largest: an fp32 value
        lo, hi = kstep_interval(np.zeros(1), np.zeros(1), a, a, np.ones((1, 16)), 1, axis=-1)
        assert (lo[0] == hi[0] == top) == point, unit


def test_step_counts_and_parts():
    assert [touched_steps(n, 256) for n in (0, 1, 16, 17, 240, 256)] == [0, 2, 2, 3, 16, 16]
    assert kstep_sum_error(17, 256, 3) == 3 * kstep_sum_error(17, 256, 1) > 0
    assert (bf16_parts("bf16"), bf16_parts("fp32")) == (1, 3)
    with pytest.raises(ValueError):
        bf16_parts("fp16")


# --- roundings, exact sums and output ranges --------------------------------------------------------------------

def test_path_roundings_count_chains_products_and_extras():
    assert path_roundings((256, 8), products=2, extra=1) == 255 + 7 + 2 + 1
    sizes = np.array([1, 16, 256])
    assert np.array_equal(path_roundings((sizes,), 1, 2 * sizes), sizes - 1 + 1 + 2 * sizes)
    assert np.array_equal(gamma(path_roundings((sizes,)), U32), [gamma(int(k), U32) for k in sizes - 1])


def test_exp_log_error_covers_the_documented_ulps():
    x = np.array([0.0, 1.0, 30.0])
    for form, calls in (("expf", 1), ("exp2f", 2), ("__expf", 1)):
        l = exp_log_error(x, calls, form)
        eta = (calls * 3.0 + (1.173 * x if form == "__expf" else 0.0)) * 2.0**-23
        assert np.all(np.exp(l) >= 1 + eta) and np.allclose(np.exp(-l), 1 - eta, rtol=1e-12, atol=0)


def test_exact_sums_are_told_apart():
    limit = exact_sum_limit("fp32")
    assert limit == 2.0**24 and exact_sum_limit("bf16", 2.0**-3) == 2.0**5
    assert sums_exact(np.ones(1000)) and sums_exact([limit - 1.0]) and not sums_exact([limit])
    assert not sums_exact([limit / 2, limit / 2])  # the sum leaves the exact integers
    assert not sums_exact([limit / 2, limit / 2, -limit / 2])  # a small total, but a partial sum need not be
    assert not sums_exact([1.0, 0.5]) and sums_exact([1.0, 0.5], unit=0.5) and not sums_exact([np.nan])
    cols = np.array([[1.0, 3.0, limit - 2], [2.0, -1.0, 2.0]])
    assert np.array_equal(sums_exact(cols, axis=0), [True, True, False])
    assert abs_sum_exact(limit - 1) and not abs_sum_exact(limit) and abs_sum_exact(limit, unit=2.0)
    with pytest.raises(ValueError):
        sums_exact([3.0], unit=3.0)


def test_exact_sums_are_exact_in_fp32_in_any_order():
    rng = np.random.default_rng(31)
    terms = rng.integers(-4000, 4000, 4000).astype(np.float64)
    assert sums_exact(terms)
    for _ in range(3):
        acc = F32(0)
        for t in rng.permutation(terms).astype(F32):
            acc = F32(acc + t)
        assert float(acc) == terms.sum()


def test_expected_bounds_decide_where_the_range_rounds_to_one_value():
    center = np.array([1.0 + 2.0**-10, 1.0 + 2.0**-8, 3.0])
    radius = np.array([2.0**-12, 2.0**-12, 0.0])
    lo, hi = expected_bounds(center, radius, "bf16")
    assert lo[0] == hi[0] == 1.0 and lo[2] == hi[2] == 3.0  # decided
    assert (lo[1], hi[1]) == (1.0, 1.0 + 2.0**-7)  # across a tie: either value
    assert np.array_equal(expected_bounds(center, radius, "fp32")[0], round_to(center - radius, "fp32"))


def test_exact_quotients_round_once_or_by_the_division_kind():
    num, den = np.array([1.0, 7.0, -5.0, 0.0]), np.array([3.0, 7.0, 9.0, 2.0])
    lo, hi, exact = exact_quotient_bounds(num, den, "ieee", "bf16")
    assert np.array_equal(lo, hi) and np.array_equal(lo, round_to((F32(num) / F32(den)).astype(np.float64), "bf16"))
    lo, hi, exact = exact_quotient_bounds(num, den, "rcp_approx", "fp32")
    assert np.all((lo <= exact) & (exact <= hi)) and lo[0] < hi[0] and lo[3] == hi[3] == 0.0
