"""Order probes of the matmul family: rows on which the plausible ways to sum over K round apart.

A kernel that declares K whole may still split it (from M, as libraries do), and one that declares pieces may
merge them in another order. For each split a kernel could plausibly take (the declared one, and 2, 3 and 4
pieces of whole k tiles) the probes hold rows whose pairs of pieces cancel (`order_rows`), so that a sum that
cuts K there rounds at the partials' magnitude into an output far smaller. How many of the alternative orders
the probes tell apart is replayed in fp32 (exact bf16 products, each piece summed in order, the pieces merged in
order, reversed or as a pairwise tree) and reported beside gate 2.
"""

from __future__ import annotations

import numpy as np

from kcontract.numerics import from_bits

ALTERNATIVE_SPLITS = (2, 3, 4)  # pieces of K a kernel could plausibly take besides the declared ones
REPLAYED_COLUMNS = 24  # output columns the replay of each alternative order computes


def tile_pieces(k: int, count: int, k_tile: int) -> list[tuple[int, int]]:
    """K cut into `count` runs of whole k tiles, as even as the tiles allow ([] where K has fewer tiles)."""
    tiles = -(-k // k_tile)
    if tiles < count:
        return []
    bounds = [min(k, (tiles * p // count) * k_tile) for p in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def probe_splits(k: int, k_tile: int, declared: list[tuple[int, int]]) -> list[tuple[str, list[tuple[int, int]]]]:
    """(label, pieces) of every split the probes are built against: the declared one where it has several pieces,
    then 2, 3 and 4 pieces, each once."""
    found = [("declared", declared)] if len(declared) > 1 else []
    for count in ALTERNATIVE_SPLITS:
        pieces = tile_pieces(k, count, k_tile)
        if pieces and all(pieces != p for _, p in found):
            found.append((f"split{count}", pieces))
    return found


def alternative_orders(k: int, k_tile: int) -> list[tuple[str, list[tuple[int, int]], str]]:
    """(name, pieces, merge) of each order the replay tells apart: K whole, and each split merged in order,
    reversed (three pieces or more), or (four pieces) as a pairwise tree."""
    orders = [("K whole", [(0, k)], "in order")]
    for count in ALTERNATIVE_SPLITS:
        pieces = tile_pieces(k, count, k_tile)
        if not pieces:
            continue
        orders.append((f"{count} pieces", pieces, "in order"))
        if count > 2:  # two fp32 pieces add alike in either order
            orders.append((f"{count} pieces reversed", pieces, "reversed"))
        if count == 4:
            orders.append(("4 pieces pairwise", pieces, "pairwise"))
    return orders


def replay(a: np.ndarray, b: np.ndarray, pieces: list[tuple[int, int]], merge: str) -> np.ndarray:
    """fp32 outputs [rows, columns] of one order: each piece's exact products summed in order, then merged."""
    af, bf = from_bits(a, "bf16").astype(np.float32), from_bits(b, "bf16").astype(np.float32)
    parts = [np.cumsum(af[:, None, lo:hi] * bf[None, :, lo:hi], axis=-1, dtype=np.float32)[..., -1]
             for lo, hi in pieces]
    if merge == "reversed":
        parts = parts[::-1]
    if merge == "pairwise" and len(parts) == 4:
        return ((parts[0] + parts[1]).astype(np.float32) + (parts[2] + parts[3]).astype(np.float32)).astype(np.float32)
    total = np.zeros_like(parts[0])
    for part in parts:
        total = (total + part).astype(np.float32)
    return total


def separated(probes: list[dict], k: int, k_tile: int) -> tuple[int, int, list[str]]:
    """How many alternative orders give outputs on the probe rows that no other order gives, of how many, and
    the names of those another order matches."""
    outs = []
    for name, pieces, merge in alternative_orders(k, k_tile):
        bits = np.concatenate([replay(p["a"], p["b"][:REPLAYED_COLUMNS], pieces, merge).view(np.uint32)
                               for p in probes])
        outs.append((name, bits))
    alike = [name for i, (name, bits) in enumerate(outs)
             if any(j != i and np.array_equal(bits, other) for j, (_, other) in enumerate(outs))]
    return len(outs) - len(alike), len(outs), alike
