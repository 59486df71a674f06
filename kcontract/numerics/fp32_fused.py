"""fp32.py's add, fma and rounding as one CuPy kernel each: the same float64 steps, one launch instead of a dozen.

Each step is an explicit round-to-nearest intrinsic (__dadd_rn, __dmul_rn, __double2float_rn), so the compiler
contracts nothing into an fma and every bit equals the numpy path (tests/test_gpu.py compares them).
"""

from __future__ import annotations

import functools

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
SOURCES = {
    "rn32": ("float64 s, float64 err", "float64 out", _ROUND),
    "add32": ("float64 a, float64 b", "float64 out", _TWO_SUM + _ROUND),
    "fma32": ("float64 x, float64 y, float64 c", "float64 out",
              "double a = __dmul_rn(x, y); double b = c;" + _TWO_SUM + _ROUND),
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
