"""Rigor of the decode range: fp32 decodes in many evaluation orders never fall outside [lo, hi].

A numpy fp32 emulation of the split-chunk decode runs each row in several orders (scores by BLAS, by
fma chains in random order, by pairwise sums; chunk sums sequential, permuted, pairwise or by sgemm;
fma or separate roundings; exp off by up to 2 ulps; online rescaling; bf16 probabilities; IEEE or
reciprocal division) and every bf16 output must lie in the range declared for that arithmetic. An
adversarial order moves every score by its full error bound, signed against output column 0, so the
weight analysis is checked near its worst case, which real fp32 orders never approach.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcontract.families.attention.bounds import decode_row_range
from kcontract.families.attention.spec import Arithmetic
from kcontract.families.attention.weights import score_error
from kcontract.gates.ranges import RangeTally
from kcontract.numerics import expected_bounds, next_down, next_up, rn_bits, round_to, ulp_of
from kcontract.problem import Checked, Expected, OutputSpec, Problem, Reference
from tests.helpers.decode_rows import Order, Row, bf16, chunk_index, draw_row, draw_v, mma_scores

L2E = np.float32(np.log2(np.e))
CELL = 1 << 23  # elements per temporary in the chunked sums


def f32(x) -> np.ndarray:
    """One fp32 rounding (from float64 or float32)."""
    return np.asarray(x).astype(np.float32)


def approx_exp(y: np.ndarray, x: np.ndarray, ulps: int, rng, push=None) -> np.ndarray:
    """fp32 of float64 values y, moved by up to `ulps` ulps (at random, or ulps * push); 1 where x == 0."""
    r = f32(y)
    if ulps:
        step = rng.integers(-ulps, ulps + 1, r.shape) if push is None else ulps * np.broadcast_to(push, r.shape)
        bits = r.view(np.int32) + step.astype(np.int32)
        r = np.where(r > 0, np.maximum(bits, 0).astype(np.int32).view(np.float32), r)
    return np.where(x == 0, np.float32(1), r).astype(np.float32)


def exp_of(x: np.ndarray, form: str, ulps: int, rng, push=None) -> np.ndarray:
    """The declared exp of fp32 arguments (log2 units for exp2f)."""
    x64 = x.astype(np.float64)
    if form == "exp2f":
        return approx_exp(np.exp2(x64), x, ulps, rng, push)
    if form == "__expf":
        t = f32(x64 * np.float64(L2E))
        return approx_exp(np.exp2(t.astype(np.float64)), x, ulps, rng, push)
    return approx_exp(np.exp(x64), x, ulps, rng, push)


def scores_fp32(row: Row, order: Order, rng) -> np.ndarray:
    """[Hq, n] fp32 scores (log2 units for exp2f) by the order's dot product."""
    hq, d = row.q.shape
    n, hk, _ = row.k.shape
    g = hq // hk
    q32, k32 = f32(row.q), f32(row.k)
    if order.dot == "adversary":
        return adversarial_scores(row, order)
    if order.dot == "mma":
        dot = mma_scores(row)
    elif order.dot == "blas":
        dot = np.stack([k32[:, h // g, :] @ q32[h] for h in range(hq)])
    elif order.dot == "pairwise":
        dot = np.stack([np.sum(k32[:, h // g, :] * q32[h], axis=1) for h in range(hq)])
    else:  # fma chain in a random order: bf16 products are exact in fp32, one rounding per step
        kt = np.ascontiguousarray(k32.transpose(1, 2, 0))  # [Hk, D, n]
        qg = q32.reshape(hk, g, d)
        acc = np.zeros((hk, g, n), np.float32)
        for i in rng.permutation(d):
            acc += qg[:, :, i, None] * kt[:, None, i, :]
        dot = acc.reshape(hq, n)
    s = f32(dot * np.float32(row.scale))
    return f32(s * L2E) if order.exp == "exp2f" else s


def adversarial_scores(row: Row, order: Order) -> np.ndarray:
    """Exact scores moved by 0.999 of their error bound: up where v[:, :, 0] exceeds the output, else down."""
    hq, d = row.q.shape
    g = hq // row.k.shape[1]
    s = np.stack([row.k[:, h // g, :] @ row.q[h] for h in range(hq)]) * row.scale
    a = np.stack([np.abs(row.k[:, h // g, :]) @ np.abs(row.q[h]) for h in range(hq)])
    v0 = np.stack([row.v[:, h // g, 0] for h in range(hq)])
    w = np.exp(s - s.max(axis=1, keepdims=True))
    o0 = np.sum(w * v0, axis=1, keepdims=True) / np.sum(w, axis=1, keepdims=True)
    s = f32(s + np.where(v0 > o0, 1.0, -1.0) * 0.999 * score_error(s, a, row.scale, d, order.arithmetic()))
    return f32(s * L2E) if order.exp == "exp2f" else s


def grid(row: Row, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Key index on the absolute chunk grid [nch, C] (-1 where no key) and each key's chunk."""
    n = row.k.shape[0]
    c = chunk_index(row.first, n, chunk)
    lane = (row.first + np.arange(n)) % chunk
    idx = -np.ones((c[-1] + 1, chunk), np.int64)
    idx[c, lane] = np.arange(n)
    return idx, c


def chunk_partials(row: Row, s: np.ndarray, order: Order, rng):
    """m [Hq, nch], l [Hq, nch], o [Hq, nch, D] in fp32."""
    hq, d = row.q.shape
    g = hq // row.k.shape[1]
    idx, _ = grid(row, order.chunk)
    on = idx >= 0
    sg = np.where(on, s[:, np.maximum(idx, 0)], -np.inf).astype(np.float32)  # [Hq, nch, C]
    vg = np.where(on[..., None, None], f32(row.v)[np.maximum(idx, 0)], 0).astype(np.float32)  # [nch, C, Hk, D]
    vg = np.moveaxis(vg, 2, 0)  # [Hk, nch, C, D]
    if order.acc == "perm":
        perm = np.argsort(rng.random(idx.shape), axis=1)
        sg = np.take_along_axis(sg, perm[None], axis=2)
        vg = np.take_along_axis(vg, perm[None, :, :, None], axis=2)
    if order.tile:
        return online_partials(sg, vg, g, order, rng)
    push = None
    if order.push:
        v0 = vg[:, :, :, 0]  # [Hk, nch, C]
        push = np.repeat(np.where(v0 > np.median(row.v[:, :, 0], axis=0)[:, None, None], 1, -1), g, axis=0)
    m = sg.max(axis=2)
    x = np.where(np.isfinite(sg), f32(sg - m[..., None]), np.float32(-np.inf))
    p = np.where(np.isfinite(sg), exp_of(np.where(np.isfinite(x), x, 0), order.exp, order.exp_ulps, rng, push), 0)
    p = p.astype(np.float32)
    p_num, p_den = rounded_p(p, order.prob_round)
    l, o = sums_in_chunk(p_num, p_den, vg, g, order, rng)
    return m, l, o


def rounded_p(p: np.ndarray, prob_round: str) -> tuple[np.ndarray, np.ndarray]:
    """(p in the numerator, p in the denominator) after the declared bf16 rounding."""
    if prob_round == "none":
        return p, p
    pb = f32(round_to(p.astype(np.float64), "bf16"))
    return (pb, pb) if prob_round == "bf16" else (pb, p)


def sums_in_chunk(p_num, p_den, vg, g, order: Order, rng):
    """l = sum p, o = sum p v per chunk in the order's summation."""
    hq, nch, c = p_num.shape
    hk, d = vg.shape[0], vg.shape[-1]
    pn = p_num.reshape(hk, g, nch, c)
    if order.acc in ("seq", "perm"):
        l = np.zeros((hq, nch), np.float32)
        o = np.zeros((hk, g, nch, d), np.float32)
        for lane in range(c):
            l = f32(l + p_den[:, :, lane])
            o = accumulate(o, pn[:, :, :, lane, None], vg[:, None, :, lane, :], order.fma)
        return l, o.reshape(hq, nch, d)
    l = np.sum(p_den, axis=2)  # pairwise over the contiguous lane axis
    if order.acc == "blas":
        o = np.matmul(np.moveaxis(pn, 1, 2), vg)  # [Hk, nch, G, D]: fp32 sgemm per chunk
        return l, np.moveaxis(o, 2, 1).reshape(hq, nch, d)
    o = np.empty((hk, g, nch, d), np.float32)
    step = max(1, CELL // (g * c * d))
    for c0 in range(0, nch, step):
        prod = f32(pn[:, :, c0:c0 + step, :, None] * vg[:, None, c0:c0 + step])
        o[:, :, c0:c0 + step] = np.sum(prod, axis=3)
    return l, o.reshape(hq, nch, d)


def accumulate(acc, a, b, fma: bool):
    """acc + a*b in fp32: fused (one rounding) or product rounded first."""
    if fma:
        return f32(acc.astype(np.float64) + a.astype(np.float64) * b.astype(np.float64))
    return f32(acc + f32(a * b))


def online_partials(sg, vg, g, order: Order, rng):
    """Chunk partials with a running max per tile: the accumulators are rescaled when it grows."""
    hq, nch, c = sg.shape
    hk, d = vg.shape[0], vg.shape[-1]
    m = np.full((hq, nch), -np.inf, np.float32)
    l = np.zeros((hq, nch), np.float32)
    o = np.zeros((hk, g, nch, d), np.float32)
    for t0 in range(0, c, order.tile):
        tile = sg[:, :, t0:t0 + order.tile]
        m_new = np.maximum(m, tile.max(axis=2))
        live = np.isfinite(m_new)
        arg = np.where(np.isfinite(m), f32(m - np.where(live, m_new, 0)), np.float32(0))
        alpha = np.where(np.isfinite(m), exp_of(arg, order.exp, order.exp_ulps, rng), np.float32(1))
        l = f32(l * alpha)
        o = f32(o * alpha.reshape(hk, g, nch, 1))
        for lane in range(tile.shape[2]):
            sv = tile[:, :, lane]
            x = np.where(np.isfinite(sv), f32(sv - np.where(live, m_new, 0)), np.float32(0))
            p = np.where(np.isfinite(sv), exp_of(x, order.exp, order.exp_ulps, rng), np.float32(0))
            p_num, p_den = rounded_p(p.astype(np.float32), order.prob_round)
            l = f32(l + p_den)
            o = accumulate(o, p_num.reshape(hk, g, nch, 1), vg[:, None, :, t0 + lane, :], order.fma)
        m = m_new
    return m, l, o.reshape(hq, nch, d)


def decode_fp32(row: Row, order: Order, rng) -> np.ndarray:
    """The row's fp32 output [Hq, D] before output rounding."""
    s = scores_fp32(row, order, rng)
    m, l, o = chunk_partials(row, s, order, rng)
    big_m = m.max(axis=1, keepdims=True)
    f = exp_of(f32(m - big_m), order.exp, order.exp_ulps, rng)
    fl = f32(f * l)
    fo = f32(f[..., None] * o)
    nch = m.shape[1]
    seq = rng.permutation(nch) if order.merge == "perm" else np.arange(nch)
    if order.merge == "pairwise":
        big_l, big_o = np.sum(fl, axis=1), np.sum(np.ascontiguousarray(np.moveaxis(fo, 1, 2)), axis=2)
    else:
        big_l, big_o = fl[:, seq[0]], fo[:, seq[0]]
        for c in seq[1:]:
            big_l, big_o = f32(big_l + fl[:, c]), f32(big_o + fo[:, c])
    if order.div == "rcp_rn":
        return f32(big_o * f32(np.float32(1) / big_l)[:, None])
    return f32(big_o / big_l[:, None])


def row_range(row: Row, arith: Arithmetic):
    """The contract's range for a row under arith."""
    return decode_row_range(row.q, row.k, row.v, chunk_index(row.first, row.k.shape[0], arith.chunk),
                            row.scale, arith)


@dataclass
class Tally:
    """Outputs checked and outside their range, with the first offender described."""

    checked: int = 0
    outside: int = 0
    worst: str = ""


def check(row: Row, orders: list[Order], rng, tally: Tally) -> dict:
    """Tally each order's bf16 outputs against the range of its arithmetic; returns {arith: (range, lo, hi)}."""
    ranges = {}
    for order in orders:
        arith = order.arithmetic()
        key = arith.model_dump_json()
        if key not in ranges:
            rr = row_range(row, arith)
            ranges[key] = (rr, *expected_bounds(rr.center, rr.radius, "bf16"))
        rr, lo, hi = ranges[key]
        out = round_to(decode_fp32(row, order, rng).astype(np.float64), "bf16")
        bad = ~((out >= lo) & (out <= hi))
        tally.checked += out.size
        if bad.any():
            tally.outside += int(bad.sum())
            i = np.argwhere(bad)[0]
            tally.worst = (f"{order} n={row.k.shape[0]} at {tuple(i)}: got {out[tuple(i)]!r}, "
                           f"range [{lo[tuple(i)]!r}, {hi[tuple(i)]!r}], center {rr.center[tuple(i)]!r}")
    return ranges


TABLE_ORDERS = [Order(dot="blas", acc="seq", merge="seq"),
                Order(dot="fma", acc="blas", fma=False, merge="perm")]

SUMMARY: dict = {"table": [], "tally": Tally(), "seconds": 0.0}


def table_rows(rng, tally: Tally) -> list[dict]:
    """Decided fractions at 1k, 8k and 32k keys, zero-mean and mean-shifted v, head dims 512 and 128.

    The shorter rows are prefixes of the 32k draw (same distribution, fewer draws).
    """
    out = []
    for d, hk in ((512, 1), (128, 1)):
        zero_mean = draw_row(rng, 32768, 8, hk, d)
        for mean in (0.0, 1.0):
            full = replace(zero_mean, v=draw_v(rng, 32768, hk, d, mean)) if mean else zero_mean
            for n in (1024, 8192, 32768):
                row = replace(full, k=full.k[:n], v=full.v[:n])
                ranges = check(row, TABLE_ORDERS[: 1 if n > 8192 else 2], rng, tally)
                rr, lo, hi = next(iter(ranges.values()))
                width = np.median(2 * rr.radius / ulp_of(rr.center, "bf16"))
                out.append({"D": d, "keys": n, "v": "mean ~1" if mean else "zero mean",
                            "k_rms": float(np.sqrt(np.mean(row.k**2))), "decided": float(np.mean(lo == hi)),
                            "width": float(width)})
    return sorted(out, key=lambda r: (-r["D"], r["keys"], r["v"] != "zero mean"))


def random_orders(rng, chunk: int) -> list[Order]:
    """A few evaluation orders at one chunk size, with random declared arithmetic."""
    exp = str(rng.choice(["expf", "exp2f", "__expf"]))
    prob = str(rng.choice(["none", "none", "bf16", "bf16_numerator"]))
    div = str(rng.choice(["ieee", "rcp_rn"]))
    base = Order(chunk=chunk, exp=exp, prob_round=prob, div=div)
    orders = [replace(base, dot=str(rng.choice(["blas", "fma", "pairwise"])),
                      acc=str(rng.choice(["seq", "perm", "pairwise", "blas"])), fma=bool(rng.random() < 0.5),
                      merge=str(rng.choice(["seq", "perm", "pairwise"])), push=bool(rng.random() < 0.3))
              for _ in range(2)]
    if chunk >= 32 and rng.random() < 0.4:
        orders.append(replace(base, tile=chunk // 4, acc="perm", fma=bool(rng.random() < 0.5)))
    if rng.random() < 0.5:
        orders.append(replace(base, dot="adversary", push=True))
    return orders


def breadth_rows(rng, tally: Tally, count: int) -> None:
    """Random shapes, ratios, contexts, chunk sizes, value kinds and arithmetic; the first row has 64k keys."""
    for i in range(count):
        d = int(rng.choice([128, 256, 512]))
        ratio = int(rng.choice([1, 2, 3, 5, 8]))
        hk = int(rng.choice([1, 2])) if ratio < 8 else 1
        n = 65536 if i == 0 else int(np.exp(rng.uniform(np.log(2), np.log(20000))))
        if n * ratio * hk * d > 2**24:  # bounded work per row
            ratio, hk = 3, 1
            d = min(d, 256)
        chunk = int(rng.choice([16, 64, 256, 1024, 4096])) if n < 65536 else 256
        row = draw_row(rng, n, ratio * hk, hk, d, v_mean=float(rng.choice([0.0, 1.0])),
                       peaks=int(rng.choice([0, 0, 4])), lift=float(rng.choice([0.0, 6.0])), chunk=chunk)
        check(row, random_orders(rng, chunk), rng, tally)


def run_campaign() -> dict:
    """The rigor campaign: the decided-fraction table rows, then 60 random rows in random orders."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(20261130)
    tally = SUMMARY["tally"]
    SUMMARY["table"] = table_rows(rng, tally)
    breadth_rows(rng, tally, 60)
    SUMMARY["seconds"] = time.perf_counter() - t0
    return SUMMARY


@pytest.fixture(scope="module")
def campaign():
    """The rigor campaign, run once per test session (its table: `python -m tests.test_decode_rigor`)."""
    return run_campaign()


def summary_lines() -> list[str]:
    """The decided-fraction table and the tally."""
    lines = ["decode range: decided fraction (bf16 outputs with lo == hi), median range width 2r in bf16 ulps",
             f"{'D':>4} {'keys':>6} {'v':>10} {'k rms':>6} {'decided':>8} {'width':>7}"]
    for r in SUMMARY["table"]:
        lines.append(f"{r['D']:>4} {r['keys']:>6} {r['v']:>10} {r['k_rms']:>6.3f} {r['decided']:>8.1%} "
                     f"{r['width']:>7.2f}")
    t = SUMMARY["tally"]
    lines.append(f"outputs checked {t.checked}, outside {t.outside}, campaign {SUMMARY['seconds']:.1f} s")
    return lines


def test_no_output_outside_its_range(campaign):
    """No false red: every emulated fp32 decode lands in its declared range."""
    tally = campaign["tally"]
    assert tally.outside == 0, tally.worst
    assert tally.checked >= 10_000


def test_mean_shifted_v_decides_most_outputs_at_1k(campaign):
    """With a per-column v mean of about 1 the range decides most outputs at 1k keys."""
    rows = [r for r in campaign["table"] if r["keys"] == 1024 and r["v"] == "mean ~1"]
    assert rows and all(r["decided"] > 0.5 for r in rows), rows


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), ratio=st.sampled_from([1, 3, 5]),
       chunk=st.sampled_from([1, 7, 32, 256]), prob=st.sampled_from(["none", "bf16", "bf16_numerator"]),
       exp=st.sampled_from(["expf", "exp2f", "__expf"]))
def test_small_rows_any_order(seed, n, ratio, chunk, prob, exp):
    """Short rows, odd chunk sizes and ratios: sequential, permuted and pairwise orders stay inside."""
    rng = np.random.default_rng(seed)
    row = draw_row(rng, n, ratio, 1, 128, v_mean=float(seed % 2), peaks=seed % 3, lift=6.0 * (seed % 5 == 0),
                   chunk=chunk)
    base = Order(chunk=chunk, exp=exp, prob_round=prob)
    orders = [replace(base, dot="fma", acc="perm", fma=False, merge="perm"),
              replace(base, dot="pairwise", acc="pairwise", merge="pairwise")]
    tally = Tally()
    check(row, orders, rng, tally)
    assert tally.outside == 0, tally.worst


def decided_exact(row: Row, order: Order, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, emulated bf16 output) for a row."""
    rr = row_range(row, order.arithmetic())
    lo, hi = expected_bounds(rr.center, rr.radius, "bf16")
    return lo, hi, round_to(decode_fp32(row, order, rng).astype(np.float64), "bf16")


def test_one_key_row_is_decided_and_bit_exact():
    """One key: p = 1, the output is v exactly."""
    rng = np.random.default_rng(1)
    row = draw_row(rng, 1, 6, 2, 256)
    lo, hi, out = decided_exact(row, Order(), rng)
    want = row.v[0][np.arange(6) // 3]
    assert np.array_equal(lo, hi) and np.array_equal(lo, want) and np.array_equal(out, want)


def test_zero_query_mirror_is_decided():
    """q = 0: every score 0, every p exactly 1; constant and one-hot columns give exact averages."""
    n, d = 1024, 128
    v = np.zeros((n, 1, d))
    v[:, 0, :64] = np.arange(64) - 20.0  # constant integer columns
    v[np.arange(64) * 16, 0, 64 + np.arange(64)] = 1.0  # one-hot probes: 1/n
    row = Row(np.zeros((4, d)), bf16(np.random.default_rng(2).standard_normal((n, 1, d))), v, 0,
              float(np.float32(d**-0.5)))
    rr = row_range(row, Arithmetic())
    assert np.all(rr.radius < 2.0**-12 * np.abs(rr.center) + 1e-30)  # summation terms only: far below half an ulp
    lo, hi, out = decided_exact(row, Order(dot="fma", acc="perm"), np.random.default_rng(3))
    want = np.concatenate([np.arange(64) - 20.0, np.full(64, 1 / n)])
    assert np.array_equal(lo, hi) and np.array_equal(lo[0], want) and np.array_equal(out, lo)


def test_hard_selection_mirror_is_decided():
    """q = 16 e_0, k[0] in {0, -256}: p exactly 1 or 0; an all-off chunk gets merge weight 0."""
    n, d = 768, 512
    on = np.zeros(n, bool)
    on[:192] = True  # chunk 0: 192 on
    on[256:320] = True  # chunk 1: 64 on, chunk 2: none
    k = np.zeros((n, 1, d))
    k[~on, 0, 0] = -256.0
    q = np.zeros((2, d))
    q[:, 0] = 16.0
    v = np.zeros((n, 1, d))
    v[:, 0, :] = (np.arange(n) // 256 + 1.0)[:, None] * np.where(np.arange(d) % 2, 1.0, -3.0)
    row = Row(q, k, v, 0, float(np.float32(d**-0.5)))
    for arith_order in (Order(), Order(prob_round="bf16", exp="exp2f"), Order(prob_round="bf16_numerator")):
        lo, hi, out = decided_exact(row, arith_order, np.random.default_rng(4))
        want = (192 * 1.0 + 64 * 2.0) / 256 * np.where(np.arange(d) % 2, 1.0, -3.0)
        assert np.array_equal(lo, hi) and np.array_equal(lo[0], want) and np.array_equal(out, lo)


def test_decided_outputs_equal_lo_and_one_ulp_off_fails_the_gate():
    """Where a range is decided the fp32 decode rounds to exactly lo; one bf16 ulp away is a gate failure."""
    rng = np.random.default_rng(5)
    row = draw_row(rng, 1000, 8, 1, 512, v_mean=1.0)
    lo, hi, out = decided_exact(row, Order(), rng)
    decided = lo == hi
    assert decided.mean() > 0.5
    assert np.array_equal(out[decided], lo[decided])
    expected = Expected("out", "bf16", lo, hi, lo, ("head", "dim"))
    problem = Problem("row", {}, {"out": OutputSpec(lo.shape, "bf16")}, {})
    for shifted in (next_up(out, "bf16"), next_down(out, "bf16")):
        tally = RangeTally(1)
        reference = Reference([expected])
        tally.add(Checked("row", problem, reference), reference, {"out": rn_bits(shifted, "bf16")})
        assert tally.result.failures >= int(decided.sum())


@pytest.mark.parametrize("d, ratio, n, chunk", [(512, 8, 3000, 256), (256, 3, 1500, 256), (128, 2, 700, 64)])
def test_tensor_core_scores_stay_inside_the_mma_range(d, ratio, n, chunk):
    """Scores by the H200's tensor-core model (k-steps of 16, 25 bits kept, truncation) fall inside the mma range."""
    rng = np.random.default_rng(d + n)
    tally = Tally()
    for v_mean, prob in ((0.0, "none"), (1.0, "bf16")):
        row = draw_row(rng, n, ratio, 1, d, v_mean=v_mean, peaks=3, lift=6.0, chunk=chunk)
        base = Order(chunk=chunk, prob_round=prob, mma=True)
        check(row, [replace(base, dot="mma", acc="perm"), replace(base, dot="adversary", push=True)], rng, tally)
    assert tally.outside == 0, tally.worst
    assert tally.checked > 0


if __name__ == "__main__":
    run_campaign()
    print("\n".join(summary_lines()))


def partials_outside(row: Row, order: Order, rng) -> dict[str, int]:
    """Emulated fp32 partials of one order outside the contract's per-chunk ranges, per partial."""
    from kcontract.families.attention.partials import partial_ranges

    s = scores_fp32(row, order, rng)
    m, l, o = chunk_partials(row, s, order, rng)
    ranges = partial_ranges(row.q, row.k, row.v, chunk_index(row.first, row.k.shape[0], order.chunk), row.scale,
                            order.arithmetic())
    found = {}
    for name, got, (lo, hi, _) in (("m", m, ranges.m), ("l", l, ranges.l), ("o", o, ranges.o)):
        found[name] = int(np.sum(~((got >= lo) & (got <= hi))))
    return found


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 600), ratio=st.sampled_from([1, 3, 8]),
       chunk=st.sampled_from([1, 7, 64, 256]), prob=st.sampled_from(["none", "bf16", "bf16_numerator"]),
       exp=st.sampled_from(["expf", "exp2f", "__expf"]), tile=st.sampled_from([0, 16]))
def test_partials_of_any_order_stay_inside_their_fp32_ranges(seed, n, ratio, chunk, prob, exp, tile):
    """m_c, l_c and o_c of sequential, permuted, pairwise, BLAS, pushed-exp and online-tile orders."""
    rng = np.random.default_rng(seed)
    row = draw_row(rng, n, ratio, 1, 128, v_mean=float(seed % 2), peaks=seed % 3, lift=6.0 * (seed % 5 == 0),
                   chunk=chunk)
    base = Order(chunk=chunk, exp=exp, prob_round=prob, tile=tile if chunk > tile > 0 else 0)
    for order in (replace(base, dot="fma", acc="perm", fma=False), replace(base, dot="pairwise", acc="pairwise"),
                  replace(base, acc="blas", push=True, exp_ulps=3 if exp != "__expf" else 2),
                  replace(base, dot="mma", mma=True)):
        if order.dot == "mma" and exp != "expf":
            continue
        assert partials_outside(row, order, rng) == {"m": 0, "l": 0, "o": 0}, order


@pytest.mark.parametrize("d, ratio, n", [(512, 16, 3000), (256, 2, 1500), (128, 4, 700)])
def test_partials_of_long_rows_stay_inside(d, ratio, n):
    rng = np.random.default_rng(d + n)
    row = draw_row(rng, n, ratio, 1, d, v_mean=1.0, peaks=4)
    for order in (Order(dot="mma", mma=True, acc="perm", fma=False), Order(dot="fma", acc="seq")):
        assert partials_outside(row, order, rng) == {"m": 0, "l": 0, "o": 0}, order


@pytest.mark.parametrize("d, ratio, n, v_mean", [(512, 16, 3000, 0.0), (256, 2, 2000, 1.0), (128, 4, 700, 0.0)])
def test_declared_tensor_core_order_replays_scores_and_decides_more(d, ratio, n, v_mean):
    """score_order: replay drops E_j; a kernel scoring in that order stays inside, and more outputs are decided."""
    rng = np.random.default_rng(d + n + 1)
    row = draw_row(rng, n, ratio, 1, d, v_mean=v_mean, peaks=2)
    order = Order(dot="mma", mma=True, acc="perm", fma=False)
    bound = order.arithmetic()
    replay = bound.model_copy(update={"score_order": "replay"})
    chunk = chunk_index(row.first, n, order.chunk)
    got = decode_fp32(row, order, rng)
    decided = {}
    for name, arith in (("bound", bound), ("replay", replay)):
        rr = decode_row_range(row.q, row.k, row.v, chunk, row.scale, arith)
        assert np.all(np.abs(got - rr.center) <= rr.radius), name
        lo, hi = expected_bounds(rr.center, rr.radius, "bf16")
        decided[name] = float(np.mean(lo == hi))
    assert decided["replay"] >= decided["bound"] and decided["replay"] > 0.3, decided
    assert partials_outside(row, order, rng) == {"m": 0, "l": 0, "o": 0}
    ranges = partial_ranges_of(row, replay)
    m = chunk_partials(row, scores_fp32(row, order, rng), order, rng)[0]
    assert np.array_equal(ranges.m[0], ranges.m[1]) and np.array_equal(m, ranges.m[0])  # m_c decided and hit


def partial_ranges_of(row: Row, arith: Arithmetic):
    from kcontract.families.attention.partials import partial_ranges

    return partial_ranges(row.q, row.k, row.v, chunk_index(row.first, row.k.shape[0], arith.chunk), row.scale, arith)
