"""Gate 4's integer mirrors: inputs on which every intermediate is exact, with exact expectations."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Arithmetic, Shape
from kcontract.families.attention.window import Window, chunk_of_key
from kcontract.numerics import from_bits, rn_bits, round_to, ulp_of
from kcontract.numerics.exact import abs_sum_exact, sums_exact

HARD_Q = 16.0  # q = 16 e_0; "off" keys get k[0] = -2^e so that their score is at most -OFF_NATS
OFF_NATS = 160.0  # exp(-103.3) is half the least fp32 subnormal: any exp of an argument below -160 is exactly 0


def edge_probes(first: int, pos: int, chunk: int) -> np.ndarray:
    """Key indices (from the first visible key) of every chunk's first and last key, sorted."""
    starts = np.arange((first // chunk) * chunk, pos + 1, chunk)
    edges = np.concatenate([np.maximum(starts, first), np.minimum(starts + chunk - 1, pos)])
    return np.unique(edges) - first


def mirror_a_row(rng: np.random.Generator, shape: Shape, window: Window, pos: int, chunk: int) -> RowData:
    """q = 0: every score 0, every p exactly 1; probe, same-sign and ramp integer columns per key head."""
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    first = window.first(pos)
    n = pos - first + 1
    probes = edge_probes(first, pos, chunk)[: d // 2]
    j = np.arange(n)[:, None]
    v = np.zeros((n, hk, d))
    for kh in range(hk):
        v[probes, kh, np.arange(len(probes))] = 1.0  # one-hot: column i is probe key i's indicator
        for col in range(len(probes), d):
            kind = col % 3
            if kind == 0:
                v[:, kh, col] = 3 + (kh + col) % 5  # same sign: partial sums leave bf16's exact integers
            elif kind == 1:
                v[:, kh, col] = ((j[:, 0] + col + 7 * kh) % 61) + 1  # ramp
            else:
                v[:, kh, col] = -(2 + (kh * 3 + col) % 7)
    k = rng.standard_normal((n, hk, d)) * 0.1
    return RowData(pos=pos, first=first, q=rn_bits(np.zeros((hq, d)), "bf16"), k=rn_bits(k, "bf16"),
                   v=rn_bits(v, "bf16"), filler_value=0.0, tag="mirror-A")


def hard_off(scale: float) -> float:
    """k[0] of an "off" key: a power of two with HARD_Q * |k[0]| * scale >= OFF_NATS, exact in bf16 and fp32."""
    exponent = max(0, int(np.ceil(np.log2(OFF_NATS / (HARD_Q * scale)))))
    if exponent > 100:
        raise ValueError(f"scale {scale:g} leaves no exact hard-selection mirror (k[0] = -2^{exponent})")
    return -float(2.0**exponent)


def mirror_b_row(shape: Shape, window: Window, pos: int, chunk: int, scale: float,
                 on_sets: list[np.ndarray] | None = None, tag: str = "mirror-B") -> RowData:
    """Hard selection: p is exactly 1 (on) or 0 (off); on-counts differ per chunk and per key head."""
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    first = window.first(pos)
    n = pos - first + 1
    cid = chunk_of_key(np.arange(first, pos + 1), first, chunk)
    k = np.zeros((n, hk, d))
    k[:, :, 0] = hard_off(scale)
    if on_sets is None:
        on_sets = [chunk_pattern_on_set(cid, kh) for kh in range(hk)]
    for kh, on in enumerate(on_sets):
        k[on, kh, 0] = 0.0
    col = np.arange(d)[None, :]
    v = np.stack([((cid[:, None] * (kh + 3) + col) % 23 + 1 + kh) * np.where(col % 4 == 3, -1, 1)
                  + (np.arange(n)[:, None] % 5) for kh in range(hk)], axis=1).astype(np.float64)
    q = np.zeros((hq, d))
    q[:, 0] = HARD_Q
    return RowData(pos=pos, first=first, q=rn_bits(q, "bf16"), k=rn_bits(k, "bf16"), v=rn_bits(v, "bf16"),
                   filler_value=0.0, tag=tag)


def chunk_pattern_on_set(cid: np.ndarray, kh: int) -> np.ndarray:
    """On keys: chunk c gets a fraction from a cycle shifted per key head, off keys first in the chunk."""
    fractions = (0.75, 0.25, 0.0, 0.5, 1.0, 0.125)
    on: list[int] = []
    for c in np.unique(cid):
        idx = np.flatnonzero(cid == c)
        count = int(round(len(idx) * fractions[(c + kh) % len(fractions)]))
        on.extend(idx[len(idx) - count:])
    if not on:
        on = [len(cid) - 1]
    return np.array(sorted(on))


def mirror_sums(row: RowData, shape: Shape, copies=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact numerator [Hq, D], denominator [Hq, 1] and sum of |v| [Hq, D] of a mirror row (weights 0 or 1): the
    sums are formed once per key head and set of on keys, which the heads of a group mostly share. `copies`
    (replay.SharedCopies on numpy) gives k and v as float64 views of their sequence's one copy."""
    q, k, v = row.floats() if copies is None else (from_bits(row.q, "bf16"), copies.float64(row.k),
                                                   copies.float64(row.v))
    num = np.zeros((shape.q_heads, shape.head_dim))
    mag = np.zeros_like(num)
    den = np.zeros((shape.q_heads, 1))
    for kh in range(shape.kv_heads):
        heads = np.arange(kh * shape.group, (kh + 1) * shape.group)
        scores = q[heads] @ k[:, kh].T  # [G, n]
        on = scores == scores.max(axis=1, keepdims=True)  # all scores are 0 or a hard-off value far below
        sets: dict[bytes, list[int]] = {}
        for i, keys in enumerate(on):
            sets.setdefault(keys.tobytes(), []).append(i)
        for members in sets.values():
            keys = on[members[0]]
            vs = v[keys, kh]
            if not (sums_exact(vs, axis=0).all() and sums_exact(keys)):  # every partial sum, in any order
                raise ValueError("mirror sums leave fp32's exact integers: lower mirror.max_keys")
            at = heads[members]
            num[at], mag[at], den[at] = vs.sum(axis=0), np.abs(vs).sum(axis=0), keys.sum()
    return num, den, mag


def bf16_accumulation_miss(row: RowData, shape: Shape, arith: Arithmetic, expected: np.ndarray) -> float:
    """Largest error, in output ulps, of the same mirror summed with bf16 running sums per chunk."""
    q, k, v = row.floats()
    heads = np.arange(shape.q_heads) // shape.group
    scores = np.einsum("jhd,hd->hj", k[:, heads], q)
    on = (scores == scores.max(axis=1, keepdims=True)).astype(np.float64)  # [Hq, n]
    v_heads = v[:, heads]  # [n, Hq, D]
    cid = chunk_of_key(np.arange(row.first, row.pos + 1), row.first, arith.chunk)
    num = np.zeros((shape.q_heads, shape.head_dim))
    den = np.zeros((shape.q_heads, 1))
    for c in np.unique(cid):
        acc_n, acc_l = np.zeros_like(num), np.zeros_like(den)
        for j in np.flatnonzero(cid == c):
            acc_n = round_to(acc_n + on[:, j, None] * v_heads[j], "bf16")
            acc_l = round_to(acc_l + on[:, j, None], "bf16")
        num += acc_n
        den += acc_l
    with np.errstate(divide="ignore", invalid="ignore"):
        got = round_to(num / den, arith.out)
        err = np.abs(got - expected) / ulp_of(expected, arith.out)
    return float(np.max(np.where(np.isnan(err), np.inf, err)))


C_SCALE = 3.0 * 2.0**-16  # mirror C's score scale: q * scale and scale * (q . k) stay exact in fp32, not in bf16
C_DIMS = 16  # dims each key head's queries use
C_MAX = 127  # |q_i|, |k_i| at most this: bf16-exact integers


def mirror_c_row(rng: np.random.Generator, shape: Shape, window: Window, pos: int, peaked: bool) -> RowData:
    """Exact scores: integer q on C_DIMS dims per key head and integer k, so every partial sum of q . k in any
    order (fp32 or tensor-core k-steps) is an integer below 2^24 and scale * (q . k) is exact; realistic v.

    Scores spread about one nat; a peaked row raises one key per key head by about six. Only the exp and the
    sums round, so l_c and o_c are checkable at fp32 resolution, and q * scale or a score rounded to bf16
    changes them (3 * 127 needs 9 bits).
    """
    hq, hk, d = shape.q_heads, shape.kv_heads, shape.head_dim
    first = window.first(pos)
    n = pos - first + 1
    q = np.zeros((hq, d))
    k = rng.integers(-C_MAX, C_MAX + 1, size=(n, hk, d)).astype(np.float64)
    for kh in range(hk):
        dims = rng.choice(d, size=min(C_DIMS, d), replace=False)
        signs = rng.choice([-1.0, 1.0], size=len(dims))
        for h in range(kh * shape.group, (kh + 1) * shape.group):
            q[h, dims] = signs * rng.integers(1, C_MAX + 1, size=len(dims))
        if peaked:
            k[int(rng.integers(n)), kh, dims] = signs * C_MAX
    bound = float(np.max(np.abs(q) @ np.abs(k).reshape(n * hk, d).T)) if n else 0.0
    if not abs_sum_exact(bound * 3):
        raise ValueError(f"mirror C scores need sums below 2^24, got {bound:g}")
    v = rng.standard_normal((n, hk, d))
    return RowData(pos=pos, first=first, q=rn_bits(q, "bf16"), k=rn_bits(k, "bf16"), v=rn_bits(v, "bf16"),
                   filler_seed=int(rng.integers(2**31)), tag="mirror-C-peaked" if peaked else "mirror-C-plain")
