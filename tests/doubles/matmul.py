"""A numpy fp32 matmul on the matmul ABI: out = a b^T, each 256-wide piece of K summed pairwise in fp32 (numpy's
sum, whose order depends on the piece's length alone: BLAS picks its blocking by the shape, so a row's bits
would follow M), the pieces added in order, then the output format."""

from __future__ import annotations

import numpy as np

from kcontract.numerics import bf16_from_f32_bits

from .decode import f32_of_bf16

PIECE = 256  # keys of K per fp32 partial product
BLOCK = 1 << 18  # products held at a time (no effect on the bits)


def product(a, b, pieces: int | None = None, acc=None, keep: int | None = None, order=None) -> np.ndarray:
    """fp32 a b^T over `pieces` contiguous pieces of K (default one per PIECE), added in `order`, each partial
    rounded by `acc`, K cut at `keep`."""
    af, bf = f32_of_bf16(a), f32_of_bf16(b)
    k = af.shape[1] if keep is None else keep
    count = pieces or -(-k // PIECE)
    bounds = np.linspace(0, k, count + 1).astype(int)
    parts = [piece_sums(af[:, lo:hi], bf[:, lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    total = np.zeros((af.shape[0], bf.shape[0]), np.float32)
    for i in (order(len(parts)) if order else range(len(parts))):
        total = (total + parts[i]).astype(np.float32)
        if acc is not None:
            total = acc(total)
    return total


def piece_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[M, N] fp32: each row's exact products with each weight row, summed pairwise along K (the contiguous axis, so
    a sum's order is the piece's length alone, whatever rows share the block)."""
    m, n = len(a), len(b)
    out = np.empty((m, n), np.float32)
    rows = max(1, BLOCK // max(1, n * a.shape[1]))
    for r in range(0, m, rows):
        np.sum(a[r:r + rows, None, :] * b[None, :, :], axis=2, dtype=np.float32, out=out[r:r + rows])
    return out


def write(out, value: np.ndarray) -> None:
    """The fp32 result in the output's format (bf16 bits, RN-even, or fp32)."""
    out[...] = bf16_from_f32_bits(value) if out.dtype == np.uint16 else value


def matmul(a, b, out, *, m, n, k):
    """The correct double."""
    write(out, product(a, b))


def split_from_rows(a, b, out, *, m, n, k):
    """Control: split-K chosen from M (more pieces for fewer rows), the canonical batch-variance fault."""
    write(out, product(a, b, pieces=max(1, 64 // len(a))))


def merge_by_row_count(a, b, out, *, m, n, k):
    """Control: the pieces added in an order that follows M, as an atomic merge's arrival order does."""
    write(out, product(a, b, order=lambda p: range(p) if len(a) % 2 else reversed(range(p))))


def sequential_split_from_rows(a, b, out, *, m, n, k):
    """Control: K summed in order in fp32, as a GPU's chain of k-steps does, but cut in two pieces for calls of 8
    rows or fewer (split-K chosen from M) while the entry declares K whole."""
    af, bf = f32_of_bf16(a), f32_of_bf16(b)
    k = af.shape[1]
    pieces = [(0, k // 2), (k // 2, k)] if len(a) <= 8 else [(0, k)]
    total = np.zeros((af.shape[0], bf.shape[0]), np.float32)
    for lo, hi in pieces:
        total = (total + in_order(af[:, lo:hi], bf[:, lo:hi])).astype(np.float32)
    write(out, total)


def in_order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[M, N] fp32: each row's exact products with each weight row added in K's order, one term after another."""
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    step = max(1, BLOCK // (a.shape[0] * b.shape[0]))
    part = None if len(at) else np.zeros((a.shape[0], b.shape[0]), np.float32)  # no terms: the sum's +0
    for lo in range(0, at.shape[0], step):
        first = 0 if part is None else 1
        products = np.empty((first + min(step, at.shape[0] - lo), a.shape[0], b.shape[0]), np.float32)
        np.multiply(at[lo:lo + step, :, None], bt[lo:lo + step, None, :], out=products[first:])  # [K, M, N], C order
        if part is not None:
            products[0] = part  # the running sum, then this step's terms
        part = np.add.reduce(products, axis=0, dtype=np.float32)  # along axis 0: one term after another
    return part


def k_tail_dropped(a, b, out, *, m, n, k):
    """Control: the last partial piece of K (past the last whole 256) never read."""
    write(out, product(a, b, keep=int(k) // PIECE * PIECE or int(k)))


def bf16_accumulator(a, b, out, *, m, n, k):
    """Control: the running sum of the pieces kept in bf16."""
    write(out, product(a, b, acc=lambda t: f32_of_bf16(bf16_from_f32_bits(t))))
