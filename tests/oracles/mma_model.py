"""Parametric, exact numpy model of one tensor-core k-step
``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` (bf16 inputs, fp32 accumulator) on sm_90,
and of a chain of such k-steps (one long dot product accumulated in one fp32 register).

One output element of one k-step is::

    d = fl( c + sum_{k=0..15} a[k] * b[k] )

with c an fp32 value and a, b bf16 values (given here as float64 arrays holding bf16-exact values).
bf16 x bf16 products are exact (at most 16 significant bits), so every variant below differs only in how
the 17 terms are aligned, truncated, grouped, added and rounded.

The model (all integer arithmetic on scaled significands, int64, exact)
-----------------------------------------------------------------------
For one *stage* (a set of terms added at once):

1. Frame exponent ``E`` = the largest alignment exponent among the stage's nonzero terms, taken before
   any cancellation.  ``align='lead'``: the exponent of each term's leading bit, floor(log2|t|).
   ``align='raw'``: the exponent the hardware sees without normalising products: ``ea + eb`` for a
   product (each bf16 exponent clamped to >= -126, the product significand lies in [1, 4)), and the
   exponent of c (clamped to >= -126).  'raw' is the Khattak-Mikaitis H100/B200 model (their extra bit
   when the largest product's significand is >= 2).  'lead' and 'raw' differ only when the largest term
   is a product whose significand product is >= 2: there 'raw' keeps one bit more below the leading bit.
   ``align='raw1'``: products sit at ``ea + eb + 1`` (a fixed binary point with the significand product
   read as 0.5..2) and c at its own exponent; with F = 25 this keeps 25 bits below c's leading bit but
   only 24 below 2^(ea+eb+1) when a product sets the frame.
2. Every term is cut to a multiple of ``2^(E - F)``, F = ``keep_bits``: ``truncate='mag'`` truncates its
   magnitude toward zero (sign-magnitude), ``'floor'`` truncates its two's-complement value toward
   -inf (a negative term loses up to one unit more).  ``'none'`` keeps it exact (reference).
3. The cut terms are added exactly (a wide fixed-point adder, no intermediate rounding).

``group`` says how the 16 products and c are split into stages:

* ``'one'``     c and all 16 products in one stage, then one rounding to fp32.
* ``'c_late'``  the 16 products in one stage (frame from the products only); their exact fixed-point sum
  then meets c in a second two-term stage (frame from c and that sum), then one rounding.
* ``'g8'``      two chained 8-product block FMAs: d1 = round(c + p0..p7), d = round(d1 + p8..p15).
* ``'g4'``      four chained 4-product block FMAs (the Volta-style structure).
* ``'g8late'``  p0..p7 and p8..p15 each in their own stage, then c and the two partial sums in a final
  three-term stage, then one rounding.

``round``: ``'rz'`` (toward zero) or ``'rn'`` (nearest-even) of the exact stage sum to fp32, fp32
subnormals included (quantum 2^-149).  Overflow: rz gives +-FLT_MAX, rn gives +-inf.

``subnormals``: ``'keep'`` (inputs and results keep subnormals; products are never flushed),
``'ftz_in'`` (bf16 subnormal a, b and fp32 subnormal c read as zero of the same sign), ``'ftz_out'``
(subnormal stage results flushed to a zero of the same sign), ``'ftz'`` (both), ``'ftz_prod'`` (a
product whose magnitude is below 2^-126 reads as zero, inputs and outputs kept).

``zero_sign`` (only when the result is zero): ``'ieee'`` -0 iff every one of the 17 terms is a zero of
negative sign (a product's sign is sign(a) xor sign(b)), else +0; ``'pos'`` always +0; ``'c'`` the result
is c itself when every product is zero (c = -0 gives -0), else +0.

Error bound implied per step (u = 2^-24)
----------------------------------------
Let e_max be the leading-bit exponent of the largest-magnitude nonzero term of a stage (c included),
F = keep_bits.  Each cut term loses less than one unit 2^(E-F) (both 'mag' and 'floor'), where the frame
E <= e_max for align 'lead' and 'raw' (and E <= e_max + 1 for 'raw1'), and for 'lead'/'raw' the largest
term loses nothing when F >= 23.  So for a one-stage model with align 'lead' or 'raw'::

    |d - exact| <  (n_terms - 1) * 2^-F * 2^e_max  +  ulp(d)            (rz)
    |d - exact| <= (n_terms - 1) * 2^-F * 2^e_max  +  ulp(d) / 2        (rn)

with ulp(d) = 2^(max(floor(log2|d|), -126) - 23) and n_terms <= 17 ('raw1': n_terms * 2^(1-F) * 2^e_max).
In units of u and of the largest term: (n_terms - 1) * 2^(24-F) * u * 2^e_max, i.e. < 16 u max|t| for
F = 24 (and for raw1 with F = 25), < 8 u max|t| for F = 25; ulp(d) <= 2 u |d| for normal d.  Multi-stage
models add one such bound per stage (their intermediate values are the stage results).  ``step_error_bound`` evaluates it per sum (stage-wise, exactly as the
model runs) so a verifier can use it; ``error_bound_formula`` documents the closed form.

Public API: ``MmaModel``, ``mma_sum``, ``mma_sum_many`` (several models on the same sums), ``chain``,
``exact_sum``, ``step_error_bound``, ``CANDIDATES``, ``PRIMARY``, ``LITERATURE``, ``model_grid``, ``prepare`` /
``mma_sum_prepared`` (reuse one decomposition across many models), bf16 helpers ``to_bf16``,
``bf16_bits``, ``bf16_from_bits``, ``f32_bits``, ``f32_from_bits``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MmaModel", "mma_sum", "mma_sum_many", "mma_sum_prepared", "prepare", "chain", "exact_sum", "step_error_bound",
    "error_bound_formula", "to_bf16", "bf16_bits", "bf16_from_bits", "f32_bits", "f32_from_bits",
    "CANDIDATES", "PRIMARY", "LITERATURE", "model_grid",
]

GROUPS = ("one", "c_late", "g8", "g4", "g8late")
TRUNCATES = ("mag", "floor", "none")
ROUNDS = ("rz", "rn")
ALIGNS = ("lead", "raw", "raw1")
SUBNORMALS = ("keep", "ftz_in", "ftz_out", "ftz", "ftz_prod")
ZERO_SIGNS = ("ieee", "pos", "c")

FLT_MAX = float(np.finfo(np.float32).max)
_EXACT_F = 55  # keep_bits used for an exact stage (fits int64: terms < 2^(F+2), 17 of them < 2^(F+7))


@dataclass(frozen=True)
class MmaModel:
    """One candidate accumulation model; see the module docstring for every field."""

    keep_bits: int = 24            # F: bits kept below the frame exponent E
    group: str = "one"
    truncate: str = "mag"
    round: str = "rz"
    align: str = "lead"
    subnormals: str = "keep"
    zero_sign: str = "ieee"

    def __post_init__(self):
        for name, allowed in (("group", GROUPS), ("truncate", TRUNCATES), ("round", ROUNDS), ("align", ALIGNS),
                              ("subnormals", SUBNORMALS), ("zero_sign", ZERO_SIGNS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} {getattr(self, name)!r} not in {allowed}")
        if self.truncate != "none" and not (8 <= int(self.keep_bits) <= _EXACT_F):
            raise ValueError(f"keep_bits must be in [8, {_EXACT_F}]")

    @property
    def name(self) -> str:
        f = "Finf" if self.truncate == "none" else f"F{self.keep_bits}"
        s = f"{self.group}/{f}/{self.align}/{self.truncate}/{self.round}"
        if self.subnormals != "keep":
            s += f"/{self.subnormals}"
        if self.zero_sign != "ieee":
            s += f"/z{self.zero_sign}"
        return s

    def replace(self, **kw) -> "MmaModel":
        return dataclasses.replace(self, **kw)

    @classmethod
    def from_name(cls, name: str) -> "MmaModel":
        parts = name.split("/")
        g, f, al, tr, rd = parts[:5]
        kw = dict(group=g, align=al, truncate=tr, round=rd,
                  keep_bits=_EXACT_F if f == "Finf" else int(f[1:]))
        for p in parts[5:]:
            if p.startswith("z"):
                kw["zero_sign"] = p[1:]
            else:
                kw["subnormals"] = p
        return cls(**kw)


# The model the brief's measured facts single out (F = 24 below the largest leading bit, one stage, RZ).
PRIMARY = MmaModel(24, "one", "mag", "rz", "lead")
# Khattak & Mikaitis (arXiv 2512.07004) H100/H200/B200 bf16->fp32: FMA size 16 with c, 2 extra alignment
# bits beyond fp32's 23 (=> F = 25 below the raw exponent), truncation, RZ.
LITERATURE = MmaModel(25, "one", "mag", "rz", "raw")

CANDIDATES: tuple[MmaModel, ...] = (
    PRIMARY,
    LITERATURE,
    MmaModel(24, "one", "mag", "rz", "raw"),
    MmaModel(25, "one", "mag", "rz", "raw1"),
    MmaModel(25, "one", "mag", "rz", "lead"),
    MmaModel(26, "one", "mag", "rz", "lead"),
    MmaModel(23, "one", "mag", "rz", "lead"),
    MmaModel(24, "one", "floor", "rz", "lead"),
    MmaModel(25, "one", "floor", "rz", "raw"),
    MmaModel(24, "one", "mag", "rn", "lead"),
    MmaModel(24, "c_late", "mag", "rz", "lead"),
    MmaModel(24, "g8", "mag", "rz", "lead"),
    MmaModel(24, "g8late", "mag", "rz", "lead"),
    MmaModel(24, "one", "mag", "rz", "lead", subnormals="ftz_in"),
    MmaModel(24, "one", "mag", "rz", "lead", subnormals="ftz_out"),
    MmaModel(24, "one", "mag", "rz", "lead", subnormals="ftz_prod"),
    MmaModel(24, "one", "mag", "rz", "lead", zero_sign="pos"),
    MmaModel(24, "one", "mag", "rz", "lead", zero_sign="c"),
)


def model_grid(keep_bits=range(22, 29), groups=("one", "c_late", "g8", "g8late", "g4"),
               truncates=("mag", "floor"), rounds=("rz", "rn"), aligns=("lead", "raw", "raw1")):
    """Every combination of the structural fields (subnormals 'keep', zero_sign 'ieee')."""
    return [MmaModel(f, g, t, r, al) for g in groups for f in keep_bits for al in aligns
            for t in truncates for r in rounds]


# ----------------------------------------------------------------------------------------------------
# bf16 / fp32 helpers
# ----------------------------------------------------------------------------------------------------

def to_bf16(x) -> np.ndarray:
    """Round float32/float64 values to bf16 (round to nearest even), returned as float64 values."""
    x32 = np.asarray(x, dtype=np.float32)
    u = x32.view(np.uint32).astype(np.uint64)
    lsb = (u >> np.uint64(16)) & np.uint64(1)
    r = ((u + np.uint64(0x7FFF) + lsb) >> np.uint64(16)) << np.uint64(16)
    nan = np.isnan(x32)
    r = np.where(nan, np.uint64(0x7FC00000), r)
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def bf16_bits(x) -> np.ndarray:
    """uint16 bit patterns of bf16-exact values."""
    x32 = np.asarray(x, dtype=np.float64).astype(np.float32)
    u = x32.view(np.uint32)
    if np.any(u & np.uint32(0xFFFF)):
        raise ValueError("value is not bf16-exact")
    return (u >> np.uint32(16)).astype(np.uint16)


def bf16_from_bits(bits) -> np.ndarray:
    u = np.asarray(bits, dtype=np.uint32) << np.uint32(16)
    return u.view(np.float32).astype(np.float64)


def f32_bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def f32_from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


# ----------------------------------------------------------------------------------------------------
# decomposition into exact integer terms
# ----------------------------------------------------------------------------------------------------

class Terms:
    """Exact terms of N sums, 16 products (columns 0..15) and c (column 16).

    value = (-1)^neg * mant * 2^q;  lead = floor(log2|value|);  raw = alignment exponent for
    align='raw';  nz = value != 0;  zneg = sign bit (zeros included).
    """

    __slots__ = ("mant", "q", "lead", "raw", "raw1", "nz", "neg", "shape", "tiny_prod")

    def __init__(self, mant, q, lead, raw, raw1, nz, neg, shape, tiny_prod):
        self.mant, self.q, self.lead, self.raw, self.raw1 = mant, q, lead, raw, raw1
        self.nz, self.neg, self.shape, self.tiny_prod = nz, neg, shape, tiny_prod

    def take(self, cols):
        return (self.mant[:, cols], self.q[:, cols], self.lead[:, cols], self.raw[:, cols],
                self.raw1[:, cols], self.nz[:, cols], self.neg[:, cols])


def _decompose(x: np.ndarray, sig_bits: int, what: str):
    """x float64 -> (mant int64 >= 0, q int64, e_raw int64 clamped to >= -126, neg bool).

    mant * 2^q == |x| exactly, mant < 2^sig_bits; raises when x has more significant bits."""
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: non-finite inputs are not modelled")
    f, e = np.frexp(np.abs(x))
    m = f * float(1 << sig_bits)
    mant = m.astype(np.int64)
    if np.any(mant != m):
        raise ValueError(f"{what}: value is not exactly representable with {sig_bits} significant bits")
    e = e.astype(np.int64)
    q = e - sig_bits
    raw = np.maximum(e - 1, -126)
    neg = np.signbit(x)
    return mant, q, raw, neg


def _bitlen(v: np.ndarray) -> np.ndarray:
    """Bit length of nonnegative int64 values (0 -> 0), exact for all int64."""
    v = np.asarray(v, dtype=np.int64)
    _, e = np.frexp(v.astype(np.float64))
    n = e.astype(np.int64)
    # float conversion may round up to the next power of two: correct it
    sh = np.clip(n - 1, 0, 62)
    too_big = (n > 0) & ((v >> sh) == 0)
    n = np.where(too_big, n - 1, n)
    return n


def prepare(c, a, b, subnormals: str = "keep") -> Terms:
    """Decompose c (..., ) fp32 and a, b (..., 16) bf16-exact float64 into exact integer terms."""
    c = np.asarray(c, dtype=np.float32)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape[-1] != 16 or b.shape != a.shape or a.shape[:-1] != c.shape:
        raise ValueError(f"shapes: c {c.shape}, a {a.shape}, b {b.shape}; want a, b = c.shape + (16,)")
    shape = c.shape
    n = int(np.prod(shape, dtype=np.int64))
    c64 = c.astype(np.float64).reshape(n)
    a = a.reshape(n, 16)
    b = b.reshape(n, 16)
    if subnormals in ("ftz_in", "ftz"):
        a = np.where(np.abs(a) < 2.0 ** -126, np.copysign(0.0, a), a)
        b = np.where(np.abs(b) < 2.0 ** -126, np.copysign(0.0, b), b)
        c64 = np.where(np.abs(c64) < 2.0 ** -126, np.copysign(0.0, c64), c64)
    ma, qa, ra, na = _decompose(a, 8, "a (bf16)")
    mb, qb, rb, nb = _decompose(b, 8, "b (bf16)")
    mc, qc, rc, ncg = _decompose(c64, 24, "c (fp32)")
    mp = ma * mb
    qp = qa + qb
    nz_p = mp != 0
    lead_p = qp + _bitlen(mp) - 1
    tiny = nz_p & (lead_p < -126)
    if subnormals == "ftz_prod":
        mp = np.where(tiny, 0, mp)
        nz_p = mp != 0
    lead_c = qc + _bitlen(mc) - 1
    mant = np.concatenate([mp, mc[:, None]], axis=1)
    q = np.concatenate([qp, qc[:, None]], axis=1)
    lead = np.concatenate([lead_p, lead_c[:, None]], axis=1)
    raw = np.concatenate([ra + rb, rc[:, None]], axis=1)
    raw1 = np.concatenate([ra + rb + 1, rc[:, None]], axis=1)
    nz = np.concatenate([nz_p, (mc != 0)[:, None]], axis=1)
    neg = np.concatenate([na ^ nb, ncg[:, None]], axis=1)
    return Terms(mant, q, lead, raw, raw1, nz, neg, shape, tiny)


def _c_terms(v: np.ndarray):
    """fp32 stage results (float64 array, N) -> one term column."""
    mant, q, raw, neg = _decompose(v, 24, "intermediate")
    lead = q + _bitlen(mant) - 1
    return (mant[:, None], q[:, None], lead[:, None], raw[:, None], raw[:, None], (mant != 0)[:, None],
            neg[:, None])


def _sum_term(S: np.ndarray, L: np.ndarray):
    """An exact fixed-point partial sum S * 2^L (int64) as one term column (its raw exponent = lead)."""
    mag = np.abs(S)
    nb = _bitlen(mag)
    lead = L + nb - 1
    nz = mag != 0
    lead = np.where(nz, lead, 0)
    return (mag[:, None], L[:, None], lead[:, None], lead[:, None], lead[:, None], nz[:, None],
            (S < 0)[:, None])


_NEG_INF_EXP = np.int64(-(1 << 40))


def _stage(cols, F: int, truncate: str, align: str):
    """Align, cut and add one stage exactly.  Returns (S int64, L int64, emax int64, lost bool, anynz)."""
    mant, q, lead, raw, raw1, nz, neg = cols
    key = raw if align == "raw" else raw1 if align == "raw1" else lead
    if truncate == "none":
        key = lead
    E = np.where(nz, key, _NEG_INF_EXP).max(axis=1)
    anynz = nz.any(axis=1)
    E = np.where(anynz, E, 0)
    emax = np.where(nz, lead, _NEG_INF_EXP).max(axis=1)
    emax = np.where(anynz, emax, 0)
    L = E - F
    s = q - L[:, None]
    left = np.clip(s, 0, 62)
    right = np.clip(-s, 0, 62)
    shifted = mant << left
    v = shifted >> right
    lost = (v << right) != shifted
    if truncate == "floor":
        v = np.where(neg, -(v + lost), v)
    else:
        v = np.where(neg, -v, v)
    v = np.where(nz, v, 0)
    return v.sum(axis=1), L, emax, (lost & nz).any(axis=1), anynz


def _round_fixed(S: np.ndarray, L: np.ndarray, mode: str, ftz_out: bool) -> np.ndarray:
    """Round S * 2^L (S int64) to fp32 with RZ or RN (subnormals on the 2^-149 grid).

    Returns float64 values (exact fp32 values, signed; zero results are +0 here)."""
    mag = np.abs(S)
    n = _bitlen(mag)
    e_r = L + n - 1
    Q = np.maximum(e_r - 23, -149)
    k = Q - L
    kc = np.clip(k, 0, 62)
    qv = mag >> kc
    rem = mag - (qv << kc)
    if mode == "rn":
        half = np.where(kc > 0, np.int64(1) << np.clip(kc - 1, 0, 61), 0)
        up = (k > 0) & (k <= 62) & ((rem > half) | ((rem == half) & ((qv & 1) == 1)))
        qv = qv + up
    # k > 62 can only happen for tiny values (subnormal underflow): qv is 0 already
    qv = np.where(k > 62, 0, qv)
    exact_small = k <= 0
    out = np.where(exact_small, np.ldexp(mag.astype(np.float64), np.clip(L, -1100, 1100)),
                   np.ldexp(qv.astype(np.float64), np.clip(L + np.maximum(k, 0), -1100, 1100)))
    over = out > FLT_MAX
    if np.any(over):
        out = np.where(over, FLT_MAX if mode == "rz" else np.inf, out)
    if ftz_out:
        out = np.where(out < 2.0 ** -126, 0.0, out)
    return np.where(S < 0, -out, out)


def _apply_zero_sign(res: np.ndarray, T: Terms, rows_neg_all_zero, zero_sign: str, c_vals) -> np.ndarray:
    zero = res == 0
    if not np.any(zero):
        return res
    if zero_sign == "pos":
        sign_neg = np.zeros(res.shape, bool)
    elif zero_sign == "ieee":
        sign_neg = rows_neg_all_zero
    else:  # 'c'
        prod_all_zero = ~T.nz[:, :16].any(axis=1)
        sign_neg = prod_all_zero & np.signbit(c_vals)
    return np.where(zero, np.where(sign_neg, -0.0, 0.0), res)


def mma_sum_prepared(T: Terms, model: MmaModel, c_vals=None, return_stages: bool = False):
    """mma_sum on a prepared decomposition (see ``prepare``); returns float32 of shape T.shape."""
    F = _EXACT_F if model.truncate == "none" else int(model.keep_bits)
    tr, al, rd = model.truncate, model.align, model.round
    ftz_out = model.subnormals in ("ftz_out", "ftz")
    N = T.mant.shape[0]
    stages = []  # (unit exponent L = E - F, nonzero terms, stage result or None), for the bound

    def finish(S, L):
        return _round_fixed(S, L, rd, ftz_out)

    if model.group == "one":
        cols = T.take(slice(0, 17))
        S, L, emax, _, _ = _stage(cols, F, tr, al)
        res = finish(S, L)
        stages.append((L, cols[5].sum(axis=1), res))
    elif model.group == "c_late":
        pc = T.take(slice(0, 16))
        S1, L1, emax1, _, _ = _stage(pc, F, tr, al)
        stages.append((L1, pc[5].sum(axis=1), None))
        t1 = _sum_term(S1, L1)
        cc = T.take(slice(16, 17))
        cols = tuple(np.concatenate([x, y], axis=1) for x, y in zip(cc, t1))
        S, L, emax, _, _ = _stage(cols, F, tr, al)
        res = finish(S, L)
        stages.append((L, cols[5].sum(axis=1), res))
    elif model.group in ("g8", "g4"):
        size = 8 if model.group == "g8" else 4
        cur = T.take(slice(16, 17))
        res = None
        ovf = np.zeros(N, bool)
        for g in range(16 // size):
            pc = T.take(slice(g * size, (g + 1) * size))
            cols = tuple(np.concatenate([y, x], axis=1) for x, y in zip(cur, pc))
            S, L, emax, _, _ = _stage(cols, F, tr, al)
            res = finish(S, L)
            stages.append((L, cols[5].sum(axis=1), res))
            inf = np.isinf(res)
            ovf |= inf
            cur = _c_terms(np.where(inf, np.copysign(FLT_MAX, res), res))
        res = np.where(ovf, np.copysign(np.inf, res), res)  # an overflowed block FMA stays infinite
    elif model.group == "g8late":
        parts = []
        for g in range(2):
            pc = T.take(slice(g * 8, (g + 1) * 8))
            S1, L1, emax1, _, _ = _stage(pc, F, tr, al)
            stages.append((L1, pc[5].sum(axis=1), None))
            parts.append(_sum_term(S1, L1))
        cc = T.take(slice(16, 17))
        cols = tuple(np.concatenate([x, y, z], axis=1) for x, y, z in zip(cc, parts[0], parts[1]))
        S, L, emax, _, _ = _stage(cols, F, tr, al)
        res = finish(S, L)
        stages.append((L, cols[5].sum(axis=1), res))
    else:  # pragma: no cover
        raise ValueError(model.group)

    all_neg_zero = (~T.nz.any(axis=1)) & T.neg.all(axis=1)
    if c_vals is None:
        c_vals = np.zeros(N)
    res = _apply_zero_sign(res, T, all_neg_zero, model.zero_sign, c_vals)
    out = res.astype(np.float32).reshape(T.shape)
    if return_stages:
        return out, stages, F
    return out


CHUNK = 16384  # rows per vectorised block: keeps temporaries in cache (4x faster than whole arrays)


def _prep_key(model: MmaModel) -> str:
    return model.subnormals if model.subnormals in ("ftz_in", "ftz", "ftz_prod") else "keep"


def mma_sum_many(c, a, b, models) -> dict:
    """Evaluate several models on the same sums; returns {model.name: float32 array of c's shape}.
    The decomposition is shared per chunk between models with the same input-subnormal handling."""
    c = np.asarray(c, dtype=np.float32)
    a = np.asarray(a)  # float64 or float32 holding bf16 values; converted per chunk
    b = np.asarray(b)
    if a.shape[-1] != 16 or b.shape != a.shape or a.shape[:-1] != c.shape:
        raise ValueError(f"shapes: c {c.shape}, a {a.shape}, b {b.shape}; want a, b = c.shape + (16,)")
    n = c.size
    cf = c.reshape(n)
    af = a.reshape(n, 16)
    bf = b.reshape(n, 16)
    models = list(models)
    outs = {m.name: np.empty(n, np.float32) for m in models}
    keys = sorted({_prep_key(m) for m in models})
    for i in range(0, n, CHUNK):
        sl = slice(i, min(n, i + CHUNK))
        cv = cf[sl].astype(np.float64)
        for k in keys:
            T = prepare(cf[sl], af[sl], bf[sl], k)
            for m in models:
                if _prep_key(m) == k:
                    outs[m.name][sl] = mma_sum_prepared(T, m, c_vals=cv)
    return {k: v.reshape(c.shape) for k, v in outs.items()}


def mma_sum(c, a, b, model: MmaModel = PRIMARY) -> np.ndarray:
    """One k-step: float32 d = model(c + sum_k a[..., k] * b[..., k]), vectorised over leading axes.

    c: float32 array of shape S; a, b: float64 arrays of shape S + (16,) holding bf16-exact values.
    """
    return mma_sum_many(c, a, b, [model])[model.name]


def chain(c0, a_steps, b_steps, model: MmaModel = PRIMARY, return_all: bool = False):
    """A chain of k-steps into one accumulator (one dot product of length 16 * steps).

    c0: float32 shape S; a_steps, b_steps: shape S + (steps, 16).  Returns the final float32 accumulator
    (shape S), or all accumulators (shape S + (steps,)) with return_all=True."""
    a_steps = np.asarray(a_steps)  # float64 or float32 holding bf16 values
    b_steps = np.asarray(b_steps)
    c = np.asarray(c0, dtype=np.float32)
    steps = a_steps.shape[-2]
    outs = []
    for s in range(steps):
        c = mma_sum(c, a_steps[..., s, :], b_steps[..., s, :], model)
        outs.append(c)
    if return_all:
        return np.stack(outs, axis=-1)
    return c


# ----------------------------------------------------------------------------------------------------
# exact references
# ----------------------------------------------------------------------------------------------------

def _round_int_py(total: int, L: int, mode: str) -> float:
    """Python-int version of _round_fixed (subnormals kept)."""
    if total == 0:
        return 0.0
    mag = abs(total)
    n = mag.bit_length()
    e_r = L + n - 1
    Q = max(e_r - 23, -149)
    k = Q - L
    if k <= 0:
        out = np.ldexp(float(mag), L)
    else:
        qv = mag >> k
        rem = mag - (qv << k)
        if mode == "rn":
            half = 1 << (k - 1)
            if rem > half or (rem == half and (qv & 1)):
                qv += 1
        out = np.ldexp(float(qv), L + k)
    if out > FLT_MAX:
        out = FLT_MAX if mode == "rz" else np.inf
    return -out if total < 0 else out


def exact_sum(c, a, b):
    """Exact c + sum a*b: returns (rz32, rn32, hi64): fp32 RZ and RN of the exact sum (subnormals kept,
    IEEE zero sign) and the float64 nearest to it."""
    c = np.asarray(c, dtype=np.float32)
    a = np.asarray(a)
    b = np.asarray(b)
    n = c.size
    rz = np.empty(n, np.float32)
    rn = np.empty(n, np.float32)
    hi = np.empty(n, np.float64)
    cf, af, bf = c.reshape(n), a.reshape(n, 16), b.reshape(n, 16)
    for i in range(0, n, CHUNK):
        sl = slice(i, min(n, i + CHUNK))
        rz[sl], rn[sl], hi[sl] = _exact_chunk(cf[sl], af[sl], bf[sl])
    return rz.reshape(c.shape), rn.reshape(c.shape), hi.reshape(c.shape)


def _exact_chunk(c, a, b):
    T = prepare(c, a, b, "keep")
    cols = T.take(slice(0, 17))
    S, L, _, lost, anynz = _stage(cols, _EXACT_F, "none", "lead")
    rz = _round_fixed(S, L, "rz", False)
    rn = _round_fixed(S, L, "rn", False)
    hi = np.ldexp(S.astype(np.float64), np.clip(L, -1100, 1100))
    idx = np.nonzero(lost)[0]
    if idx.size:
        mant, q, nz, neg = T.mant[idx], T.q[idx], T.nz[idx], T.neg[idx]
        for j, r in enumerate(idx):
            sel = nz[j]
            qs = q[j][sel]
            qmin = int(qs.min())
            tot = 0
            for m, qq, ng in zip(mant[j][sel].tolist(), qs.tolist(), neg[j][sel].tolist()):
                t = m << (qq - qmin)
                tot += -t if ng else t
            rz[r] = _round_int_py(tot, qmin, "rz")
            rn[r] = _round_int_py(tot, qmin, "rn")
            hi[r] = float(np.ldexp(float(tot), qmin)) if tot != 0 else 0.0
    all_neg_zero = (~T.nz.any(axis=1)) & T.neg.all(axis=1)
    c64 = c.astype(np.float64).reshape(-1)
    rz = _apply_zero_sign(rz, T, all_neg_zero, "ieee", c64)
    rn = _apply_zero_sign(rn, T, all_neg_zero, "ieee", c64)
    hi = np.where(hi == 0, np.where(all_neg_zero, -0.0, 0.0), hi)
    return rz.astype(np.float32), rn.astype(np.float32), hi


def ulp32(x) -> np.ndarray:
    """fp32 ulp at |x| (2^-149 for subnormals/zero)."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    _, e = np.frexp(x)
    e = np.where(x == 0, -125, e.astype(np.int64))
    return np.ldexp(1.0, np.maximum(e - 1, -126) - 23)


def error_bound_formula(model: MmaModel) -> str:
    F = "inf" if model.truncate == "none" else str(model.keep_bits)
    r = "ulp(d)" if model.round == "rz" else "ulp(d)/2"
    if model.align == "raw1":
        return (f"per stage: |d - exact| < n_terms * 2^(1-{F}) * 2^e_max + {r}; "
                f"u = 2^-24: n_terms * 2^(25-{F}) * u * 2^e_max + {r}")
    return (f"per stage: |d - exact| < (n_terms - 1) * 2^-{F} * 2^e_max + {r}; "
            f"u = 2^-24: (n_terms - 1) * 2^(24-{F}) * u * 2^e_max + {r}")


def step_error_bound(c, a, b, model: MmaModel = PRIMARY) -> np.ndarray:
    """A rigorous bound on |model result - exact sum| per sum (float64), stage by stage:
    sum over stages of (n_nonzero_terms - 1) * 2^(E - F) + ulp(stage result) (or ulp/2 for rn), where E
    is the stage's frame (<= its largest leading-bit exponent e_max; e_max + 1 for 'raw1', which also
    counts all n terms).  Partial sums that are not rounded
    ('c_late', 'g8late' first stages) contribute their truncation term only."""
    c = np.asarray(c, dtype=np.float32)
    n = c.size
    if n > CHUNK:  # chunked like mma_sum_many (keeps temporaries small)
        a2 = np.asarray(a).reshape(n, 16)
        b2 = np.asarray(b).reshape(n, 16)
        c2 = c.reshape(n)
        parts = [step_error_bound(c2[i:i + CHUNK], a2[i:i + CHUNK], b2[i:i + CHUNK], model)
                 for i in range(0, n, CHUNK)]
        return np.concatenate(parts).reshape(c.shape)
    T = prepare(c, a, b, model.subnormals)
    _, stages, F = mma_sum_prepared(T, model, c_vals=c.astype(np.float64).reshape(-1), return_stages=True)
    bound = np.zeros(T.mant.shape[0])
    # the largest term of a stage is never cut for 'lead'/'raw' frames when F >= 23
    spare_largest = model.align in ("lead", "raw") and F >= 23
    for L, nt, res in stages:
        if model.truncate != "none":
            ncut = np.maximum(nt - 1, 0) if spare_largest else nt
            bound += ncut * np.ldexp(1.0, np.clip(L, -1100, 1100))
        if res is not None:
            u = ulp32(res)
            if model.subnormals in ("ftz_out", "ftz"):
                u = np.maximum(u, 2.0 ** -126)
            bound += u if model.round == "rz" else u / 2
    if model.subnormals != "keep":
        # what flushing drops before the stages: flushed inputs' products (and c), or tiny products
        a64 = np.asarray(a, dtype=np.float64).reshape(-1, 16)
        b64 = np.asarray(b, dtype=np.float64).reshape(-1, 16)
        c64 = c.astype(np.float64).reshape(-1)
        p = np.abs(a64 * b64)
        if model.subnormals in ("ftz_in", "ftz"):
            tiny_in = (np.abs(a64) < 2.0 ** -126) | (np.abs(b64) < 2.0 ** -126)
            bound += np.where(tiny_in, p, 0.0).sum(axis=1) * (1 + 2.0 ** -20)
            bound += np.where(np.abs(c64) < 2.0 ** -126, np.abs(c64), 0.0)
        if model.subnormals == "ftz_prod":
            bound += np.where(p < 2.0 ** -126, p, 0.0).sum(axis=1) * (1 + 2.0 ** -20)
    return bound.reshape(T.shape)
