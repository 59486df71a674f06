"""Exact rounding from float64 into a format, and conversion between values and bit patterns."""

from __future__ import annotations

import numpy as np

from . import fused
from .formats import Format
from .xp import array_module
from .formats import fmt as as_format

_QNAN = {"bf16": 0x7FC0, "fp16": 0x7E00, "fp32": 0x7FC00000}  # canonical quiet NaN
_POISON = {"bf16": 0x7FFF, "fp16": 0x7FFF, "fp32": 0x7FFFFFFF}  # quiet NaN with full payload


def _quantize(x, f: Format, op: str) -> np.ndarray:
    """Round finite x to f's grid with op ('rint' or 'trunc') on the scaled significand."""
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    finite = xp.isfinite(x)
    xf = xp.where(finite, x, 0.0)
    e = xp.frexp(xf)[1].astype(xp.int32) - 1  # floor(log2|x|) for x != 0
    q = (xp.maximum(e, f.emin) - f.precision + 1).astype(xp.int32)  # exponent of the grid spacing at |x|
    with np.errstate(over="ignore"):
        r = xp.ldexp(getattr(xp, op)(xp.ldexp(xf, -q)), q)  # exact: power-of-two scalings of integers below 2**(p+1)
    return xp.where(finite, r, x)


def _rint_bits(x: np.ndarray, f: Format) -> np.ndarray:
    """RN-even of float64 x to f's precision by integer arithmetic on the float64 bits (normal range)."""
    xp = array_module(x)
    shift = 53 - f.precision
    bits = x.view(xp.uint64)
    lsb = bits >> xp.uint64(shift)
    lsb &= xp.uint64(1)
    rounded = bits + xp.uint64((1 << (shift - 1)) - 1)
    rounded += lsb
    rounded &= xp.uint64(~((1 << shift) - 1) & 0xFFFFFFFFFFFFFFFF)
    return rounded.view(xp.float64)


_CASTS = {"fp32": np.float32, "fp16": np.float16}  # numpy's casts from float64 round to nearest-even, subnormals too


def round_to(x, fmt: str | Format) -> np.ndarray:
    """Round float64 x to nearest-even in fmt, as float64; overflow to inf, NaN and signed zeros kept."""
    f = as_format(fmt)
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    if fused.usable(xp, x) and x.ndim:
        return fused.kernel(f"round_to_{f.name}")(x)
    if xp is np and f.name in _CASTS:  # the same values as _round_bits (tests/test_numerics.py), in two passes
        with np.errstate(over="ignore", invalid="ignore"):
            r = x.astype(_CASTS[f.name]).astype(np.float64)
        return np.where(np.isfinite(x), r, x)[()]
    return _round_bits(x, f)


BLOCK = 1 << 18  # elements rounded at a time on numpy: the temporaries stay in the allocator's reach (no bits change)


def _round_bits(x, f: Format) -> np.ndarray:
    """round_to on the float64 bits: RN-even in the normal range, on the bottom exponent's grid below it (zeros
    round to themselves); NaN, infinities and overflow looked at only where the largest magnitude calls for it.
    Large numpy arrays go a block at a time, so that no temporary is a fresh mapping the kernel must fault in."""
    xp = array_module(x)
    if xp is np and x.size > BLOCK:
        flat = x.reshape(-1)
        out = np.empty(flat.shape, np.float64)
        for lo in range(0, flat.size, BLOCK):
            out[lo:lo + BLOCK] = _round_block(flat[lo:lo + BLOCK], f)
        return out.reshape(x.shape)
    return _round_block(x, f)


def _round_block(x, f: Format) -> np.ndarray:
    """_round_bits of arrays of any size."""
    xp = array_module(x)
    a = xp.abs(x)
    r = _rint_bits(xp.asarray(x, order="C"), f)
    with np.errstate(invalid="ignore"):
        small = (a < f.min_normal) & (a > 0)  # f's subnormal range: grid spacing fixed at the bottom exponent
    if small.any():
        r = xp.where(small, _quantize(x, f, "rint"), r)
    if not (a.max() <= f.max_finite if a.size else True):  # NaN, an infinity or a value past f's largest
        r = xp.where(xp.isfinite(x), r, x)
        with np.errstate(invalid="ignore"):
            r = xp.where(xp.abs(r) > f.max_finite, xp.copysign(xp.inf, r), r)
    return r[()]


def truncate_to(x, fmt: str | Format) -> np.ndarray:
    """Round float64 x toward zero in fmt, as float64; finite overflow gives ±max_finite."""
    f = as_format(fmt)
    r = _quantize(x, f, "trunc")
    r = np.where(np.isfinite(r) & (np.abs(r) > f.max_finite), np.copysign(f.max_finite, r), r)
    return r[()]


def is_representable(x, fmt: str | Format) -> np.ndarray:
    """True where x is NaN, ±inf or exactly a value of fmt."""
    x = np.asarray(x, dtype=np.float64)
    return (np.isnan(x) | (round_to(x, fmt) == x))[()]


def to_bits(x, fmt: str | Format) -> np.ndarray:
    """Bit patterns of values already in fmt; NaN gives the canonical quiet NaN."""
    f = as_format(fmt)
    if f.name == "fp32" and getattr(x, "dtype", None) == np.float32:
        return np.asarray(x).view(np.uint32)  # every float32 is an fp32 value (NaN keeps its payload)
    x = np.asarray(x, dtype=np.float64)
    bad = ~np.asarray(is_representable(x, f))
    if bad.any():
        first = x[bad].flat[0]
        raise ValueError(f"{first!r} is not representable in {f.name} ({int(bad.sum())} such values)")
    return _bits_of(x, f)


def _bits_of(x: np.ndarray, f: Format) -> np.ndarray:
    """Bit patterns of values known to be in f."""
    with np.errstate(over="ignore", invalid="ignore"):
        if f.name == "fp16":
            b = x.astype(np.float16).view(np.uint16)
        elif f.name == "fp32":
            b = x.astype(np.float32).view(np.uint32)
        else:
            b = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    b = np.where(np.isnan(x), f.uint(_QNAN[f.name]), b).astype(f.uint)
    return b[()]


def from_bits(bits, fmt: str | Format) -> np.ndarray:
    """float64 values of bit patterns in fmt."""
    f = as_format(fmt)
    b = np.asarray(bits)
    if b.dtype.kind not in "ui":
        raise ValueError(f"bit patterns must be integers, given dtype {b.dtype}")
    if b.size and (b.min() < 0 or int(b.max()) >= 1 << f.bits):
        raise ValueError(f"bit patterns out of range for {f.name} ({f.bits} bits)")
    if f.name == "fp16":
        v = b.astype(np.uint16).view(np.float16)
    elif f.name == "fp32":
        v = b.astype(np.uint32).view(np.float32)
    else:
        v = (b.astype(np.uint32) << np.uint32(16)).view(np.float32)
    with np.errstate(invalid="ignore"):  # signalling NaN patterns
        return v.astype(np.float64)[()]


def rn_bits(x, fmt: str | Format) -> np.ndarray:
    """Bit patterns of round_to(x, fmt)."""
    f = as_format(fmt)
    return _bits_of(np.asarray(round_to(x, f), dtype=np.float64), f)


def poison_bits(fmt: str | Format):
    """A quiet-NaN bit pattern for poisoning output buffers before launch."""
    f = as_format(fmt)
    return f.uint(_POISON[f.name])


def bf16_bits_of_finite(x: np.ndarray) -> np.ndarray:
    """bf16 bits (RN-even) of a float32 array of finite values, computed in place: x is consumed. Drawn inputs
    take this path (no NaN to keep quiet, a tenth of the passes)."""
    b = x.view(np.uint32)
    carry = b >> np.uint32(16)
    carry &= np.uint32(1)
    carry += np.uint32(0x7FFF)
    b += carry
    b >>= np.uint32(16)
    return b.astype(np.uint16)


def bf16_from_f32_bits(x_float32) -> np.ndarray:
    """bf16 bits of float32 values (or uint32 bit patterns) by RN-even on the bits, as a kernel does."""
    a = np.asarray(x_float32)
    b = a.astype(np.uint32) if a.dtype.kind in "ui" else a.astype(np.float32).view(np.uint32)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (b >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)[()]
