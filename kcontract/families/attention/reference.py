"""Float64 reference and rigorous ranges for a decode call, row by row."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.bounds import decode_row_range
from kcontract.families.attention.partials import partial_ranges
from kcontract.families.attention.replay import replay_rows
from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Arithmetic
from kcontract.families.attention.tensorcore import replay_scores
from kcontract.families.attention.window import chunk_of_key
from kcontract.numerics.ranges import expected_bounds
from kcontract.problem import Expected, Reference

AXES = ("row", "head", "dim")
ROW_M_AXES = ("row", "head")


def expected_outputs(rows: list[RowData], arith: Arithmetic, scale: float, exact_scores: bool = False) -> Expected:
    """Per-output [RN(lo), RN(hi)] for every row of a call, in the declared output format."""
    centers, los, his = [], [], []
    for row in rows:
        positions = np.arange(row.first, row.pos + 1)
        rng = decode_row_range(row.q, row.k, row.v, chunk_of_key(positions, row.first, arith.chunk), scale, arith,
                               exact_scores=exact_scores, scores=row.extra.get("scores"))
        lo, hi = expected_bounds(rng.center, rng.radius, arith.out)
        centers.append(rng.center)
        los.append(lo)
        his.append(hi)
    return Expected(output="out", fmt=arith.out, lo=np.stack(los), hi=np.stack(his), center=np.stack(centers),
                    axes=AXES)


def expected_partials(rows: list[RowData], arith: Arithmetic, scale: float, n_part: int,
                      exact_scores: bool = False) -> list[Expected]:
    """part_m, part_l [B, Hq, n_part] and part_o [B, Hq, n_part, D] ranges in fp32; slots a row uses only."""
    hq, d = rows[0].q.shape
    shapes = {"part_m": (len(rows), hq, n_part), "part_l": (len(rows), hq, n_part),
              "part_o": (len(rows), hq, n_part, d)}
    arrays = {name: [np.zeros(shape, np.float32) for _ in range(3)] for name, shape in shapes.items()}
    masks = {name: np.zeros(shape, bool) for name, shape in shapes.items()}
    for b, row in enumerate(rows):
        positions = np.arange(row.first, row.pos + 1)
        ranges = partial_ranges(row.q, row.k, row.v, chunk_of_key(positions, row.first, arith.chunk), scale, arith,
                                exact_scores=exact_scores, scores=row.extra.get("scores"))
        for name, got in (("part_m", ranges.m), ("part_l", ranges.l), ("part_o", ranges.o)):
            used = got[0].shape[1]
            for target, values in zip(arrays[name], got):
                target[b, :, :used] = values
            masks[name][b, :, :used] = True
    axes = {"part_m": ("row", "head", "chunk"), "part_l": ("row", "head", "chunk"),
            "part_o": ("row", "head", "chunk", "dim")}
    return [Expected(name, "fp32", lo, hi, center, axes[name], masks[name])
            for name, (lo, hi, center) in arrays.items()]


def replayed_outputs(rows: list[RowData], arith: Arithmetic, scale: float, n_part: int | None = None,
                     row_m: bool = False, kernel: dict[str, int] | None = None) -> dict[str, Expected]:
    """Every output's range by replaying the declared sum order (replay.py): out, the partials where n_part is
    given, and each row's largest score where `row_m` (exact: decided)."""
    hq, d = rows[0].q.shape
    group = hq // rows[0].k.shape[1]
    found = [None] * len(rows)
    for block in replay_blocks(rows, arith.chunk):  # rows with one chunk count, replayed together
        got = replay_rows([(rows[b].q, rows[b].k, rows[b].v, rows[b].first, rows[b].pos, rows[b].extra.get("scores"))
                           for b in block], scale, arith.chunk, group, order=arith.sum_order, p_round=arith.prob_round,
                          grouping=arith.score_grouping, chains=arith.merge_chains, kernel=kernel,
                          partials=n_part is not None)
        for b, f in zip(block, got):
            found[b] = f
    out_lo, out_hi = (np.stack([f["out"][i] for f in found]) for i in (0, 1))
    expected = {"out": Expected("out", arith.out, out_lo, out_hi, 0.5 * (out_lo + out_hi), AXES)}
    if row_m:
        top = np.stack([f["row_m"][0] for f in found])
        expected["row_m"] = Expected("row_m", "fp32", top, top.copy(), top, ROW_M_AXES)
    if n_part is None:
        return expected
    for name, key, tail in (("part_m", "m", ()), ("part_l", "l", ()), ("part_o", "o", (d,))):
        lo, hi = (np.zeros((len(rows), hq, n_part) + tail, np.float32) for _ in range(2))
        mask = np.zeros(lo.shape, bool)
        for b, f in enumerate(found):
            used = f[key][0].shape[1]
            lo[b, :, :used], hi[b, :, :used], mask[b, :, :used] = f[key][0], f[key][1], True
        axes = ("row", "head", "chunk") + (("dim",) if tail else ())
        expected[name] = Expected(name, "fp32", lo, hi, 0.5 * (lo + hi), axes, mask)
    return expected


def call_reference(rows: list[RowData], arith: Arithmetic, scale: float, n_part: int | None,
                   exact_scores: bool = False, row_m: bool = False, kernel: dict[str, int] | None = None) -> Reference:
    """A call's reference: the output's range and, unless the kernel hides them, its partials' at fp32
    resolution (and each row's largest score where `row_m`); by the declared order's replay where one is
    declared and the scores are not exact anyway (`kernel`: the counts the kernel exports for its order).

    An online merge (arith.merges_online) is replayed for exact scores (mirror C) too: the order-free range
    (bounds.py, weights.py) assumes one rounded fma per chunk into L and O in the exact maximum's frame, where the
    online merge rounds twice per chunk (RN(L a), then the fma) and weighs a chunk by the product of the exp factors
    taken since. The replay is rigorous for any inputs: it needs only the kernel's fp32 scores, which the declared
    grouping's replay gives bit for bit (on mirror C's inputs, the exact scores).
    """
    if arith.sum_order != "any" and (arith.merges_online or not exact_scores):
        found = replayed_outputs(rows, arith, scale, n_part if arith.partials == "checked" else None, row_m, kernel)
        return Reference(list(found.values()))
    if row_m:
        raise ValueError("row_m is checked by replaying a declared order: declare sum_order: online_mma")
    expected = [expected_outputs(rows, arith, scale, exact_scores)]
    if arith.partials == "checked":
        expected += expected_partials(rows, arith, scale, n_part, exact_scores)
    return Reference(expected)


def row_maxima(rows: list[RowData], arith: Arithmetic, scale: float) -> Expected:
    """Each row's largest score [rows, Hq] in fp32, exact: the kernel's scores replayed in the declared k-step
    grouping (or those a row carries)."""
    tops = []
    for row in rows:
        s = row.extra.get("scores")
        if s is None:
            q, k, _ = row.floats()
            group = q.shape[0] // k.shape[1]
            s = np.concatenate([replay_scores(q[g * group:(g + 1) * group], k[:, g, :], scale,
                                              grouping=arith.score_grouping) for g in range(k.shape[1])])
        tops.append(s.max(axis=1))
    top = np.stack(tops)
    return Expected("row_m", "fp32", top, top.copy(), top, ROW_M_AXES)


def replay_blocks(rows: list[RowData], chunk: int) -> list[list[int]]:
    """Row indices in blocks of one chunk count each."""
    by_count: dict[int, list[int]] = {}
    for b, r in enumerate(rows):
        by_count.setdefault(r.pos // chunk - r.first // chunk + 1, []).append(b)
    return list(by_count.values())
