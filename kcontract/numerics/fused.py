"""fp32.py's add, fma and rounding, and rounding.py's round_to, as one CuPy kernel each: the same float64 steps,
one launch instead of a dozen or more.

Each step is an explicit round-to-nearest intrinsic (__dadd_rn, __dmul_rn, __double2float_rn) or exact (a power
of two scaling, integer arithmetic on the bits), so the compiler contracts nothing into an fma and every bit
equals the numpy path (tests/test_gpu.py compares them).
"""

from __future__ import annotations

import functools

from .formats import fmt as as_format

# RN32 of s + err, where s is the float64 sum and err its rounding error (TwoSum): a tie of s is broken by err.
_ROUND = r"""
    float f = __double2float_rn(s);
    double r = (double)f;
    if (err > 0.0) {
        double up = (double)nextafterf(f, __int_as_float(0x7f800000));
        if (s == __dmul_rn(0.5, __dadd_rn(r, up))) r = up;
    } else if (err < 0.0) {
        double down = (double)nextafterf(f, __int_as_float(0xff800000));
        if (s == __dmul_rn(0.5, __dadd_rn(r, down))) r = down;
    }
    out = r;
"""
_TWO_SUM = r"""
    double s = __dadd_rn(a, b);
    double bb = __dsub_rn(s, a);
    double err = __dadd_rn(__dsub_rn(a, __dsub_rn(s, bb)), __dsub_rn(b, bb));
"""
# round_to's RN-even into a format of PRECISION bits: on the float64 bits in the normal range, on the grid of the
# bottom exponent below it (a power-of-two scaling, rint, and back: all exact), overflow to a signed infinity.
_ROUND_TO = r"""
    if (!isfinite(x)) {
        out = x;
    } else if (fabs(x) < MIN_NORMAL) {
        out = ldexp(rint(ldexp(x, -GRID)), GRID);
    } else {
        unsigned long long b = (unsigned long long)__double_as_longlong(x);
        unsigned long long lsb = (b >> SHIFT) & 1ull;
        b = ((b + (1ull << (SHIFT - 1)) - 1ull + lsb) >> SHIFT) << SHIFT;
        out = __longlong_as_double((long long)b);
    }
    if (fabs(out) > MAX_FINITE) out = copysign(__longlong_as_double(0x7ff0000000000000ll), out);
"""


def round_to_body(name: str) -> str:
    """_ROUND_TO with a format's constants written in (each an exact power-of-two expression)."""
    f = as_format(name)
    return (f"const int SHIFT = {53 - f.precision}; const int GRID = {f.emin - f.precision + 1};\n"
            f"const double MIN_NORMAL = ldexp(1.0, {f.emin});\n"
            f"const double MAX_FINITE = ldexp(2.0 - ldexp(1.0, {1 - f.precision}), {f.emax});" + _ROUND_TO)


SOURCES = {
    "rn32": ("float64 s, float64 err", "float64 out", _ROUND),
    "add32": ("float64 a, float64 b", "float64 out", _TWO_SUM + _ROUND),
    "fma32": ("float64 x, float64 y, float64 c", "float64 out",
              "double a = __dmul_rn(x, y); double b = c;" + _TWO_SUM + _ROUND),
    **{f"round_to_{name}": ("float64 x", "float64 out", round_to_body(name)) for name in ("bf16", "fp16", "fp32")},
}


def usable(xp, *arrays) -> bool:
    """Whether the fused kernels apply: CuPy arrays of float64 (anything else takes the generic path)."""
    return xp.__name__ == "cupy" and all(type(a).__module__.startswith("cupy") and a.dtype == xp.float64
                                          for a in arrays)


@functools.cache
def kernel(name: str):
    """The CuPy elementwise kernel of one operation (compiled once per process)."""
    import cupy

    params, out, body = SOURCES[name]
    return cupy.ElementwiseKernel(params, out, body, f"kcontract_{name}")
