"""Order probes of the rmsnorm family: rows on which the plausible orders of the sum of squares round apart.

The sum is over positive squares, so orders part only where a partial absorbs what another order adds first.
A probe row holds one huge element (its square most of S) near a chosen position and dust everywhere else, each
dust square just under half an ulp of the huge one: a thread whose chain reaches the huge square before its dust
loses that dust, so how much of the dust survives depends on how lanes, warps, vectors and blocks cut the row.
A few trim elements then set the exact S of each row of a comb so that S / hidden crosses 4^k between the
orders' sums; at 4^k, 1 / sqrt is 2^-k exactly. Every element's mantissa is chosen so that x * w is a midpoint
of bf16 where the column's weight allows it, so on either side of 4^k those outputs round apart: a reduction
that follows the row count changes thousands of outputs on every seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache

import numpy as np

from kcontract.numerics import bf16_from_f32_bits, from_bits, round_to, to_bits, truncate_to

DUST = (0.40, 0.47)  # a dust square, in ulps of the huge square: absorbed one at a time, kept as lumps
HUGE = 0.7  # the huge square's share of S before trimming
TRIMS = 5  # elements that set S exactly, each about 2^-6 of the one before
EDGE = 32  # the huge element sits among the first (or last) EDGE of its placement
PLACEMENTS = ("head", "middle", "tail")
Reduce = Callable[[np.ndarray], np.ndarray]  # fp32 squares [rows, hidden] -> fp32 sums [rows]


def lanes(squares: np.ndarray, threads: int, vector: int = 1, warps_in_order: bool = False) -> np.ndarray:
    """Thread t adds elements t * vector + j (strided by threads * vector) in order; then a halving tree over the
    threads, or (warps_in_order) a halving tree in each warp of 32 and the warps added in order."""
    rows, hidden = squares.shape
    step = threads * vector
    padded = np.zeros((rows, -(-hidden // step) * step), np.float32)
    padded[:, :hidden] = squares
    chunks = padded.reshape(rows, -1, threads, vector)
    part = np.zeros((rows, threads), np.float32)
    for s in range(chunks.shape[1]):
        for v in range(vector):
            part += chunks[:, s, :, v]
    if warps_in_order:
        part = _halving(part.reshape(rows, -1, 32))
        total = np.zeros(rows, np.float32)
        for w in range(part.shape[1]):
            total += part[:, w]
        return total
    return _halving(part)


def _halving(part: np.ndarray) -> np.ndarray:
    """Sum the last axis as a butterfly does: halves added pairwise until one is left."""
    while part.shape[-1] > 1:
        half = part.shape[-1] // 2
        part = part[..., :half] + part[..., half:]
    return part[..., 0]


def blocks(squares: np.ndarray, count: int, threads: int) -> np.ndarray:
    """The row cut into `count` contiguous pieces, each summed by its own block of `threads`, merged in order."""
    hidden = squares.shape[1]
    cuts = [hidden * i // count for i in range(count + 1)]
    total = np.zeros(squares.shape[0], np.float32)
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        total += lanes(squares[:, lo:hi], threads)
    return total


def alternative_orders() -> list[tuple[str, Reduce]]:
    """(name, reduction) of every order the replay tells apart."""
    orders: list[tuple[str, Reduce]] = [("in order", lambda s: np.cumsum(s, axis=1, dtype=np.float32)[:, -1])]
    orders += [(f"{t} lanes", lambda s, t=t: lanes(s, t)) for t in (32, 64, 128, 256, 512, 1024)]
    orders += [("256 lanes of 8", lambda s: lanes(s, 256, 8)), ("128 lanes of 4", lambda s: lanes(s, 128, 4)),
               ("256 lanes, warps in order", lambda s: lanes(s, 256, warps_in_order=True)),
               ("2 blocks", lambda s: blocks(s, 2, 256)), ("4 blocks", lambda s: blocks(s, 4, 128))]
    return orders


@lru_cache(maxsize=256)
def _midpoint_mantissas(w_mantissa: int) -> tuple[int, ...]:
    """bf16 mantissas m (128..255) for which m times the weight's mantissa has exactly nine significant bits:
    x * w is then a midpoint of bf16, and rounds apart on either side of an exact power of two."""
    found = []
    for m in range(128, 256):
        p = m * w_mantissa
        p >>= (p & -p).bit_length() - 1
        if p.bit_length() == 9:
            found.append(m)
    return tuple(found) or tuple(range(128, 256))


def _mantissa(value: float) -> int:
    """The 8-bit significand (128..255) of a nonzero bf16 value."""
    return int(math.frexp(abs(value))[0] * 256)


def _element(rng: np.random.Generator, mantissas: tuple[int, ...], square: float) -> float:
    """±m 2^e with m from `mantissas` and (m 2^e)^2 at most `square`, within a factor 4 of it."""
    m = int(rng.choice(mantissas))
    return float(rng.choice((-1.0, 1.0))) * math.ldexp(m, math.floor(math.log2(math.sqrt(square) / m)))


def _largest_square_below(r: Fraction) -> float:
    """The largest bf16 h > 0 with h^2 <= r."""
    h = float(truncate_to(math.sqrt(float(r)), "bf16"))
    bits = int(to_bits(np.array([h]), "bf16")[0])
    while Fraction(h) ** 2 > r:
        bits -= 1
        h = float(from_bits(np.array([bits], np.uint16), "bf16")[0])
    return h


def scale_exponent(eps: float) -> int:
    """k with eps below a quarter ulp of 4^k: S / hidden + eps rounds to 4^k wherever S / hidden does."""
    return max(4, math.ceil((26 + math.log2(eps)) / 2))


def probe_rows(w: np.ndarray, eps: float, placement: str, rng: np.random.Generator) -> np.ndarray:
    """float64 bf16 values [rows, hidden]: one comb of probe rows with the huge element at `placement`, w the
    weights as float64."""
    hidden = len(w)
    target = Fraction(hidden * 4 ** scale_exponent(eps))
    near = {"head": 0, "middle": hidden // 2, "tail": max(0, hidden - EDGE)}[placement]
    spots = near + rng.permutation(min(EDGE, hidden - near))
    huge, trims = int(spots[0]), [int(s) for s in spots[1:1 + TRIMS]]
    huge_square = float(target) * HUGE
    dust_square = math.ldexp(1.0, math.floor(math.log2(huge_square)) - 23)
    row = np.array([_element(rng, _midpoint_mantissas(_mantissa(wj)) if wj else tuple(range(128, 256)),
                             huge_square if j == huge else dust_square * rng.uniform(*DUST))
                    for j, wj in enumerate(w)])
    row[trims] = 0.0
    untrimmed = sum(Fraction(v) ** 2 for v in row)

    def trimmed(s: Fraction) -> np.ndarray:
        out, rest = row.copy(), s - untrimmed
        for t in trims:
            if rest <= 0:
                break
            out[t] = _largest_square_below(rest) * float(rng.choice((-1.0, 1.0)))
            rest -= Fraction(out[t]) ** 2
        return out

    at_target = trimmed(target)
    squares = (at_target.astype(np.float32) ** 2)[None]
    sums = sorted({Fraction(float(reduce(squares)[0])) - target for _, reduce in alternative_orders()})
    ulp = Fraction(math.ldexp(1.0, math.floor(math.log2(float(target))) - 23))
    crossings = [(a + b) / 2 for a, b in zip(sums[:-1], sums[1:])] + [sums[0] - ulp, sums[-1] + ulp]
    return np.stack([trimmed(target - c) for c in crossings])


def outputs(x: np.ndarray, w: np.ndarray, eps: float, reduce: Reduce) -> np.ndarray:
    """bf16 bits of (x inv) w with inv = 1 / sqrt(S / hidden + eps), S summed by `reduce`."""
    h = x.astype(np.float32)
    s = reduce((h * h).astype(np.float32))
    mean = (s / np.float32(x.shape[1]) + np.float32(eps)).astype(np.float32)
    inv = (1.0 / np.sqrt(mean.astype(np.float64))).astype(np.float32)
    return bf16_from_f32_bits((h * inv[:, None]).astype(np.float32) * w.astype(np.float32)[None, :])


def separated(rows: np.ndarray, w: np.ndarray, eps: float) -> tuple[int, int, list[str]]:
    """How many alternative orders give outputs on the probe rows that no other order gives, of how many, and
    the names of those another order matches."""
    outs = [(name, outputs(rows, w, eps, reduce)) for name, reduce in alternative_orders()]
    alike = [name for i, (name, bits) in enumerate(outs)
             if any(j != i and np.array_equal(bits, other) for j, (_, other) in enumerate(outs))]
    return len(outs) - len(alike), len(outs), alike


def as_bf16_bits(values: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of bf16 values."""
    return to_bits(round_to(values, "bf16"), "bf16").astype(np.uint16)
