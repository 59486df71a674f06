"""fp32 rounding of exact values: a rational rounded to nearest-even, and an fma rounded once, by exact integer
arithmetic (floats are dyadic, so a product plus a sum is an integer over a power of two)."""

from __future__ import annotations

import math
from fractions import Fraction


def rn32_exact(x: Fraction) -> float:
    """Round a rational to fp32 by RN-even, exactly (normal range)."""
    if x == 0:
        return 0.0
    sign, x = (-1 if x < 0 else 1), abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    unit = Fraction(2) ** (e - 23)
    q, r = divmod(x / unit, 1)
    q = int(q) + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and int(q) % 2) else 0)
    return sign * float(q * unit)


def fma32_exact(x: float, y: float, z: float) -> float:
    """RN-even to fp32 of x y + z, computed exactly (normal range; an exact zero gives +0.0, as rn32_exact)."""
    (ax, bx), (ay, by), (az, bz) = x.as_integer_ratio(), y.as_integer_ratio(), z.as_integer_ratio()
    shift = max(bx * by, bz).bit_length() - 1  # every denominator is a power of two
    num = ax * ay * ((1 << shift) // (bx * by)) + az * ((1 << shift) // bz)
    if num == 0:
        return 0.0
    sign, num = (-1.0 if num < 0 else 1.0), abs(num)
    drop = num.bit_length() - 24  # bits below fp32's 24
    if drop > 0:
        q, rest, half = num >> drop, num & ((1 << drop) - 1), 1 << (drop - 1)
        q += 1 if rest > half or (rest == half and q & 1) else 0
    else:
        q, drop = num, 0
    return sign * math.ldexp(q, drop - shift)
