"""Exact format helpers: rounding against numpy casts and known bf16 bit patterns, ulps, gamma."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcontract.numerics import rounding
from kcontract.numerics import (
    bf16_bits_of_finite,
    FORMATS,
    U32,
    U_BF16,
    bf16_from_f32_bits,
    fmt,
    from_bits,
    gamma,
    next_down,
    next_up,
    ordered,
    poison_bits,
    rn_bits,
    round_to,
    to_bits,
    truncate_to,
    ulp_distance,
    ulp_of,
)

finite64 = st.floats(allow_nan=False, allow_infinity=False)
# float64 values near the bf16/fp16/fp32 grids, where ties and subnormals live
gridish = st.builds(
    lambda m, e, s: s * m * 2.0**e,
    st.integers(0, 2**30),
    st.integers(-180, 110),
    st.sampled_from([1.0, -1.0]),
)


def same(a, b) -> bool:
    """Bit-equal float64 arrays: NaN equals NaN, and zeros must agree in sign."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return bool(np.array_equal(a.view(np.uint64), b.view(np.uint64)) or (np.isnan(a) & np.isnan(b)).all())


def ref_bf16(bits: np.ndarray) -> np.ndarray:
    """Reference RN-even float32 -> bf16 on bits for non-NaN values."""
    b = bits.astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


# --- formats -------------------------------------------------------------------------------

def test_format_constants():
    bf, h, s = fmt("bf16"), fmt("fp16"), fmt("fp32")
    assert (bf.precision, bf.emin, bf.emax, bf.bits) == (8, -126, 127, 16)
    assert (h.precision, h.emin, h.emax, h.bits) == (11, -14, 15, 16)
    assert (s.precision, s.emin, s.emax, s.bits) == (24, -126, 127, 32)
    assert h.max_finite == 65504.0 and s.max_finite == float(np.finfo(np.float32).max)
    assert h.min_subnormal == 2.0**-24 and s.min_subnormal == 2.0**-149 and bf.min_subnormal == 2.0**-133
    assert bf.u == 2.0**-8 and h.u == 2.0**-11 and s.u == 2.0**-24
    assert bf.uint is np.uint16 and h.uint is np.uint16 and s.uint is np.uint32
    assert fmt(bf) is bf and fmt("fp32") is s and set(FORMATS) == {"bf16", "fp16", "fp32"}
    with pytest.raises(ValueError):
        fmt("fp8")


# --- round_to against numpy's correctly rounded casts ---------------------------------------

@given(st.one_of(finite64, gridish))
def test_round_fp32_matches_numpy(x):
    with np.errstate(over="ignore"):
        want = np.float64(np.float32(x))
    assert same(round_to(x, "fp32"), want)


@given(st.one_of(finite64, gridish))
def test_round_fp16_matches_numpy(x):
    with np.errstate(over="ignore"):
        want = np.float64(np.float16(x))
    assert same(round_to(x, "fp16"), want)


def test_round_vectorised_matches_numpy():
    rng = np.random.default_rng(1)
    x = np.ldexp(rng.standard_normal(200_000), rng.integers(-160, 140, 200_000))
    x = np.concatenate([x, np.ldexp(rng.integers(-2**11, 2**11, 100_000) + 0.5, rng.integers(-170, -100, 100_000))])
    with np.errstate(over="ignore"):
        for name, cast in (("fp32", np.float32), ("fp16", np.float16)):
            want = x.astype(cast).astype(np.float64)
            assert same(round_to(x, name), want)
            assert same(rounding._round_bits(x, fmt(name)), want)  # the bits path bf16 takes, held to the casts
            grid = x.reshape(500, 600).T  # blocks of a strided array keep its shape and order
            assert same(rounding._round_bits(grid, fmt(name)), want.reshape(500, 600).T)


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32"])
def test_round_specials(name):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300])
    r = round_to(x, name)
    assert np.isnan(r[0])
    assert same(r[1:], [np.inf, -np.inf, 0.0, -0.0, 0.0, -0.0, np.inf, -np.inf])
    assert np.isscalar(round_to(1.0, name)) or np.ndim(round_to(1.0, name)) == 0


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32"])
def test_overflow_threshold(name):
    f = fmt(name)
    edge = (2 - 2.0**-f.precision) * 2.0**f.emax
    assert round_to(edge, name) == np.inf and round_to(-edge, name) == -np.inf
    assert round_to(np.nextafter(edge, 0), name) == f.max_finite
    assert round_to(f.max_finite, name) == f.max_finite


# --- bf16 bit patterns --------------------------------------------------------------------

@pytest.mark.parametrize(
    "x, bits",
    [
        (1.0, 0x3F80),
        (1 + 2.0**-8, 0x3F80),  # tie to even
        (1 + 3 * 2.0**-8, 0x3F82),  # tie to even, upward
        (-2.0, 0xC000),
        ((2 - 2.0**-7) * 2.0**127, 0x7F7F),
        ((2 - 2.0**-8) * 2.0**127, 0x7F80),
        (np.nextafter((2 - 2.0**-8) * 2.0**127, 0), 0x7F7F),
        (2.0**-133, 0x0001),
        (2.0**-134, 0x0000),  # tie to even
        (1.5 * 2.0**-134, 0x0001),
        (3 * 2.0**-134, 0x0002),  # tie to even
        (-(2.0**-134), 0x8000),
        (np.nan, 0x7FC0),
    ],
)
def test_bf16_known_patterns(x, bits):
    assert int(rn_bits(x, "bf16")) == bits


def test_bf16_no_double_rounding():
    x = 1 + 2.0**-8 + 2.0**-30
    via_fp32 = int(bf16_from_f32_bits(np.float32(x)))
    assert via_fp32 == 0x3F80  # fp32 lands on the tie, then ties to even
    assert int(rn_bits(x, "bf16")) == 0x3F81  # directly, x is above the tie
    assert round_to(x, "bf16") == 1 + 2.0**-7


@given(st.floats(width=32))
def test_bf16_agrees_with_bit_reference(x):
    x32 = np.float32(x)
    bits = np.asarray(x32).view(np.uint32)
    kern = int(bf16_from_f32_bits(x32))
    if np.isnan(x32):
        assert np.isnan(from_bits(kern, "bf16")) and kern & 0x0040
        assert int(rn_bits(np.float64(x32), "bf16")) == 0x7FC0
    else:
        want = int(ref_bf16(bits))
        assert int(rn_bits(np.float64(x32), "bf16")) == want
        assert kern == want


def test_bf16_agrees_on_random_bit_patterns():
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 2**32, 500_000, dtype=np.uint64).astype(np.uint32)
    bits[:4] = [0x00000000, 0x80000000, 0x7F7FFFFF, 0x0000FFFF]
    x = bits.view(np.float32)
    keep = ~np.isnan(x)
    want = ref_bf16(bits[keep])
    assert np.array_equal(rn_bits(x[keep].astype(np.float64), "bf16"), want)
    assert np.array_equal(bf16_from_f32_bits(x[keep]), want)
    assert np.array_equal(bf16_from_f32_bits(bits[keep]), want)
    nan_out = bf16_from_f32_bits(x[~keep])
    assert np.isnan(from_bits(nan_out, "bf16")).all()
    assert np.array_equal(bf16_bits_of_finite(x[keep].copy()), want)  # drawn inputs' path: finite values


# --- bits round trips ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_all_16bit_patterns_round_trip(name):
    bits = np.arange(1 << 16, dtype=np.uint16)
    v = from_bits(bits, name)
    keep = ~np.isnan(v)
    assert np.array_equal(to_bits(v[keep], name), bits[keep])
    assert same(round_to(v, name), v)
    assert (to_bits(v[~keep], name) == {"bf16": 0x7FC0, "fp16": 0x7E00}[name]).all()


def test_to_bits_rejects_unrepresentable():
    assert int(to_bits(np.nan, "fp32")) == 0x7FC00000
    assert int(to_bits(-0.0, "fp16")) == 0x8000
    with pytest.raises(ValueError):
        to_bits(0.1, "fp32")
    with pytest.raises(ValueError):
        to_bits([1.0, 1 + 2.0**-9], "bf16")
    with pytest.raises(ValueError):
        from_bits(0x10000, "bf16")


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32"])
def test_poison_is_nan(name):
    p = poison_bits(name)
    assert p.dtype == fmt(name).uint and np.isnan(from_bits(p, name))


def test_truncate():
    assert truncate_to(1 + 2.0**-8 + 2.0**-9, "bf16") == 1.0
    assert truncate_to(-(1 + 2.0**-7 + 2.0**-9), "bf16") == -(1 + 2.0**-7)
    assert truncate_to(1e300, "fp16") == 65504.0 and truncate_to(-np.inf, "fp16") == -np.inf
    assert same(truncate_to(-(2.0**-30), "fp16"), -0.0)


@given(st.one_of(finite64, gridish), st.sampled_from(["bf16", "fp16", "fp32"]))
def test_truncate_brackets_round(x, name):
    t, r = truncate_to(x, name), round_to(x, name)
    assert abs(t) <= abs(x) and (t == r or t == next_down(r, name) or t == next_up(r, name) or np.isinf(r))


# --- ulps ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32"])
def test_ordered_monotone(name):
    f = fmt(name)
    rng = np.random.default_rng(3)
    x = np.sort(round_to(np.ldexp(rng.standard_normal(20_000), rng.integers(-30, 20, 20_000)), name))
    x = x[np.isfinite(x)]
    x = np.concatenate([[-np.inf, -f.max_finite], x, [f.max_finite, np.inf]])
    o = ordered(to_bits(x, name), name)
    assert o.dtype == np.int64 and (np.diff(o) >= 0).all()
    assert ((np.diff(o) == 0) == (np.diff(x) == 0)).all()
    assert ordered(to_bits(-0.0, name), name) == 0 == ordered(to_bits(0.0, name), name)
    assert ulp_distance(to_bits(x[1:], name), to_bits(x[:-1], name), name).min() >= 0


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32"])
def test_next_up_down(name):
    f = fmt(name)
    v = from_bits(np.arange(0, 1 << 16, 7, dtype=np.uint32) << (f.bits - 16), name)
    v = v[np.isfinite(v)]
    assert (next_up(next_down(v, name), name) == v).all()
    assert (next_down(next_up(v, name), name) == v).all()
    assert (next_up(v, name) > v).all() and (next_down(v, name) < v).all()
    up = to_bits(next_up(v[v != 0], name), name)
    assert (ulp_distance(up, to_bits(v[v != 0], name), name) == 1).all()
    assert next_up(f.max_finite, name) == np.inf and next_down(-f.max_finite, name) == -np.inf
    assert next_up(-np.inf, name) == -f.max_finite and next_up(np.inf, name) == np.inf
    assert next_up(0.0, name) == f.min_subnormal and next_down(0.0, name) == -f.min_subnormal
    assert next_up(-0.0, name) == f.min_subnormal
    assert same(next_up(-f.min_subnormal, name), -0.0) and same(next_down(f.min_subnormal, name), 0.0)
    assert next_up(f.min_normal - f.min_subnormal, name) == f.min_normal
    assert np.isnan(next_up(np.nan, name))


def test_ulp_of():
    assert ulp_of(1.0, "bf16") == 2.0**-7
    assert ulp_of(1.0, "fp16") == 2.0**-10
    assert ulp_of(1.0, "fp32") == 2.0**-23
    assert ulp_of(-3.0, "fp32") == 2.0**-22
    assert ulp_of(np.nextafter(2.0, 0), "bf16") == 2.0**-7
    for f in FORMATS.values():
        assert ulp_of(0.0, f) == f.min_subnormal == ulp_of(f.min_subnormal, f)
        assert ulp_of(f.max_finite, f) == 2.0 ** (f.emax - f.precision + 1)
    assert np.array_equal(ulp_of([1.0, 2.0], "bf16"), [2.0**-7, 2.0**-6])


@given(st.one_of(finite64, gridish), st.sampled_from(["bf16", "fp16", "fp32"]))
def test_round_error_within_half_ulp(x, name):
    r = round_to(x, name)
    if np.isfinite(r):
        assert abs(r - x) <= ulp_of(x, name) / 2


# --- bounds -------------------------------------------------------------------------------

def test_gamma():
    assert U32 == 2.0**-24 and U_BF16 == 2.0**-8
    assert gamma(1, U32) == U32 / (1 - U32)
    assert gamma(0, U32) == 0.0
    assert np.allclose(gamma(np.array([1, 10, 100]), U_BF16), [n / 256 / (1 - n / 256) for n in (1, 10, 100)], rtol=0)
    assert gamma(128, U_BF16) == 1.0
    with pytest.raises(ValueError):
        gamma(256, U_BF16)
    with pytest.raises(ValueError):
        gamma([1, 2**24], U32)


@pytest.mark.parametrize("op", ["sum", "max"])
def test_padded_segment_reduce_matches_reduceat(op):
    """The GPU's padded segment reduction equals numpy's reduceat on chunk-like segments."""
    from kcontract.numerics.xp import segment_reduce

    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1000))
    starts = np.array([0, 17, 273, 529, 785])
    padded = segment_reduce(x, starts, op, padded=True)
    plain = segment_reduce(x, starts, op, padded=False)
    assert padded.shape == plain.shape == (3, 5)
    if op == "sum":
        np.testing.assert_allclose(padded, plain, rtol=1e-14, atol=0)
    else:
        np.testing.assert_array_equal(padded, plain)


def test_references_stay_on_numpy_when_asked(monkeypatch):
    from kcontract.numerics import xp

    xp.reference_module.cache_clear()
    monkeypatch.setenv("KCONTRACT_REFERENCES", "numpy")
    try:
        assert xp.reference_module() is np and xp.reference_device() == "cpu"
    finally:
        xp.reference_module.cache_clear()
