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


# tensorcore.kstep_dots in one kernel: thread (i, j) runs the k-steps of a[i] . b[j] in step order, each step as
# tensorcore.kstep does it (products framed at the largest exponent, cut to KEEP_BITS below it, the integer cuts
# added, which is exact in any order, and the total truncated to fp32).
KSTEP_DOTS = r"""
__device__ int raw_exponent(double x) {
    int e;
    frexp(x, &e);
    return max(e - 1, -126);
}

__device__ double truncate_f32(double x) {
    float f = __double2float_rn(x);
    if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
    return (double)f;
}

extern "C" __global__ void kcontract_kstep_dots(const double* a, const double* b, const int* groups, double* out,
                                                int m, int n, int k, int steps, int keep_bits) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= (long long)m * n) return;
    const double* ai = a + (t / n) * (long long)k;
    const double* bj = b + (t % n) * (long long)k;
    double acc = 0.0;
    for (int s = 0; s < steps; ++s) {
        const int* g = groups + s * 16;
        int frame = acc != 0.0 ? raw_exponent(acc) : -1000000;
        for (int i = 0; i < 16; ++i) {
            double x = ai[g[i]], y = bj[g[i]];
            if (__dmul_rn(x, y) != 0.0) frame = max(frame, raw_exponent(x) + raw_exponent(y));
        }
        if (frame <= -100000) { acc = __dmul_rn(acc, 0.0); continue; }
        double unit = ldexp(1.0, frame - keep_bits);
        double cut = trunc(acc / unit);
        for (int i = 0; i < 16; ++i) cut = __dadd_rn(cut, trunc(__dmul_rn(ai[g[i]], bj[g[i]]) / unit));
        acc = truncate_f32(__dmul_rn(cut, unit));
    }
    out[t] = acc;
}
"""


RAW_SOURCES = {"kstep_dots": KSTEP_DOTS}


def usable(xp, *arrays) -> bool:
    """Whether the fused kernels apply: CuPy arrays of float64 (anything else takes the generic path)."""
    return xp.__name__ == "cupy" and all(type(a).__module__.startswith("cupy") and a.dtype == xp.float64
                                          for a in arrays)


def kstep_dots(a, b, groups, keep_bits: int):
    """[m, n] tensor-core dot products of a [m, K] and b [n, K] (CuPy float64) in the k-steps `groups` [S, 16]."""
    import cupy

    a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
    g = cupy.ascontiguousarray(cupy.asarray(groups, dtype=cupy.int32))
    m, n = a.shape[0], b.shape[0]
    out = cupy.empty((m, n), dtype=cupy.float64)
    if m * n:
        threads = 128
        raw_kernel("kstep_dots")(((m * n + threads - 1) // threads,), (threads,),
                                  (a, b, g, out, cupy.int32(m), cupy.int32(n), cupy.int32(a.shape[1]),
                                   cupy.int32(g.shape[0]), cupy.int32(keep_bits)))
    return out


@functools.cache
def raw_kernel(name: str):
    """A CuPy raw kernel of this module (compiled once per process)."""
    import cupy

    return cupy.RawKernel(RAW_SOURCES[name], f"kcontract_{name}")


@functools.cache
def kernel(name: str):
    """The CuPy elementwise kernel of one operation (compiled once per process)."""
    import cupy

    params, out, body = SOURCES[name]
    return cupy.ElementwiseKernel(params, out, body, f"kcontract_{name}")
