"""The fused prompt ABI and its declared order online_mma: the numpy double of the fused kernel passes
gates 1-4 with both planted faults red, the replay's quad sums and online merge (in one chain or in several) are the
fp32 order they declare, the double's results lie inside the replayed ranges, natural k-steps group 16 consecutive
dims, and contradicting declarations are refused by name."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.families.attention import replay
from kcontract.families.attention.prompt import AttentionPrompt
from kcontract.families.attention.prompt_layout import ATTEND_ARGS
from kcontract.families.attention.prompt_spec import PromptSpec
from kcontract.families.attention.reference import replayed_outputs
from kcontract.families.attention.replay import _fold_online, _merge_online, _quad_sums, exp_interval, replay_row, replay_rows
from kcontract.families.attention.rows import RowData
from kcontract.families.attention.spec import Arithmetic, DecodeSpec
from kcontract.families.attention.tensorcore import kstep_dims, replay_dots
from kcontract.numerics.tensorcore import kstep
from kcontract.numerics import round_to, rn_bits
from kcontract.gatetable import Suite
from tests.doubles.prompt_fused import attend_tile, online_merge, quad_sums
from tests.helpers.cli import kcontract_in_process
from tests.helpers.decode_rows import bf16_row
from tests.oracles.fp32 import fma32_exact, rn32_exact

ROOT = Path(__file__).resolve().parents[1]
FUSED = {"chunk": 64, "score": "mma_bf16", "score_order": "replay_natural", "sum_order": "online_mma",
         "pv": "mma_bf16", "partials": "hidden"}
SUMMARY = ("SUMMARY 4 kernels: 4 pass gates 1-4, 0 fail, 0 known findings; 4 controls: 4 red as planted, 0 missed; "
           "0 limit problems")


def test_the_fused_cpu_contract_passes_and_every_control_is_red_where_planted(tmp_path):
    report = tmp_path / "run.json"
    proc = kcontract_in_process("run", "--contract", "tests/contracts/fused.yaml", "--jobs", "2", "--json",
                                str(report), env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert SUMMARY in proc.stdout, proc.stdout[-3000:]
    for entry in ("np_fused_d128_g2_p32", "np_fused_d64_g2_bf16_sliding", "np_fused_d64_g2_bf16_sliding_chains2",
                  "np_fused_d64_g1_p32_chains2"):
        for gate in (1, 2, 3, 4):
            assert re.search(rf"^{entry} gate {gate} .*: pass, \d+ ", proc.stdout, re.M), (entry, gate)
    doc = json.loads(report.read_text())
    for control in doc["controls"]:
        red = [int(g) for g, r in control["gates"].items() if not r["passed"]]
        assert red == [doc["planted"][control["task"]["name"]]], control["task"]
    backwards = next(c for c in doc["controls"] if c["task"]["name"] == "np_fused_backwards_merge")
    assert backwards["gates"]["1"]["failures"] > 1000  # the gate-1 order probes, under the declared order
    for entry in doc["entries"]:
        for gate in ("1", "3", "4"):  # row_m is checked bit for bit beside out
            by_output = entry["gates"][gate]["facts"]["by_output"]
            assert by_output["row_m"]["decided"] == by_output["row_m"]["checked"] > 0
            assert by_output["row_m"]["failures"] == 0


def test_quad_sums_add_each_threads_keys_in_order_then_the_butterfly():
    rng = np.random.default_rng(5)
    p = np.exp(rng.standard_normal((7, 64)) * 3).astype(np.float32)
    p[2, 10:40] = 0  # masked keys add exact zeros
    want = []
    for row in p:
        lanes = [np.float32(0)] * 4
        for t in range(8):
            for e in (0, 1):
                lanes = [np.float32(lanes[c] + row[8 * t + 2 * c + e]) for c in range(4)]
        lanes = [np.float32(lanes[c] + lanes[c ^ 1]) for c in range(4)]
        lanes = [np.float32(lanes[c] + lanes[c ^ 2]) for c in range(4)]
        want.append(lanes[0])
    assert np.array_equal(_quad_sums(p.astype(np.float64)), np.array(want, np.float64))
    assert np.array_equal(quad_sums(p), np.array(want, np.float32))


def test_natural_k_steps_take_dims_16s_to_16s_plus_15_in_order():
    rng = np.random.default_rng(9)
    d = 128
    assert np.array_equal(kstep_dims(d, "natural"), np.arange(d).reshape(d // 16, 16))
    q = round_to(rng.standard_normal((3, d)), "bf16")
    k = round_to(rng.standard_normal((200, d)) * 2.0 ** rng.integers(-6, 6, (200, 1)), "bf16")
    acc = np.zeros((3, 200))
    for s in range(d // 16):
        dims = slice(16 * s, 16 * s + 16)
        acc = kstep(acc, np.broadcast_to(q[:, None, dims], (3, 200, 16)), np.broadcast_to(k[None, :, dims],
                                                                                         (3, 200, 16)))
    assert np.array_equal(replay_dots(q, k, grouping="natural"), acc)
    assert not np.array_equal(replay_dots(q, k), acc)  # the decode grouping rounds elsewhere
    with pytest.raises(ValueError, match="a k-step grouping of decode or natural, given: 'wgmma'"):
        kstep_dims(d, "wgmma")


def online_exact(m, l, o, expf):
    """The online merge of one row in exact rationals, each step rounded to fp32: L, O and bf16(RN(O / L))."""
    state = (-np.inf, 0.0, [0.0] * len(o[0]))
    for mc, lc, oc in zip(m, l, o):
        state = exact_step(state, mc, lc, oc, expf)
    _, big_l, big_o = state
    return round_to(np.array([rn32_exact(Fraction(y) / Fraction(big_l)) for y in big_o]), "bf16")


def merge_inputs(rng, nch: int, d: int):
    """Chunk maxima tens of nats apart (fp32), l_c >= 1 and signed o_c (fp32) for one row."""
    m = np.float32(rng.uniform(-30, 30, nch)).astype(np.float64)
    l = np.float32(1 + rng.uniform(0, 60, nch)).astype(np.float64)
    o = np.float32(rng.standard_normal((nch, d)) * l[:, None]).astype(np.float64)
    return m, l, o


def test_the_online_merge_replay_is_the_exact_fp32_order_and_bounds_every_expf_within_its_ulps(monkeypatch):
    rng = np.random.default_rng(17)
    for trial in range(6):
        m, l, o = merge_inputs(rng, 7, 5)
        lo, hi = _merge_online(m[None], l[None], l[None], o[None], o[None])
        for _ in range(4):  # expf anywhere in its interval: each call a random fp32 value inside
            def pick(x):
                a, b = exp_interval(np.array([float(x)]))
                steps = int(rng.integers(0, 2 * replay.EXP_ULPS + 1))
                v = np.float32(a[0])
                for _ in range(steps):
                    v = min(np.nextafter(v, np.float32(np.inf)), np.float32(b[0]))
                return float(v)

            got = online_exact(m, l, o, pick)
            assert np.all((lo[0] <= got) & (got <= hi[0])), trial
    monkeypatch.setattr(replay, "EXP_ULPS", 0)  # expf = RN32(exp): the interval is one value, the replay exact
    for trial in range(6):
        m, l, o = merge_inputs(rng, 6, 5)
        lo, hi = _merge_online(m[None], l[None], l[None], o[None], o[None])
        want = online_exact(m, l, o, lambda x: float(np.float32(np.exp(np.float64(x)))))
        assert np.array_equal(lo[0], want) and np.array_equal(hi[0], want), trial


def peaked_tile(rng, n: int, d: int, group: int, heights: list[float]):
    """bf16 q [G, D], k and v [n, 1, D] with one key per 64-key chunk raised by heights[c] nats."""
    q, k, v, scale = bf16_row(rng, group, n, d, k_rms=0.15)
    qf = q.mean(axis=0)
    for c, h in enumerate(heights):
        j = 64 * c + int(rng.integers(64))
        if j < n:
            k[j, 0] = round_to(qf * h / (float(qf @ q.mean(axis=0)) * scale), "bf16")
    return q, k, v, scale


@pytest.mark.parametrize("heights", [[0] * 10, [0, 2, 1, 4, 3, 6, 5, 8, 7, 10], [5, 50, 10, 80, 0, 110, 20, 108, 3, 60]])
@pytest.mark.parametrize("p_bf16", [False, True])
def test_the_doubles_fp32_results_lie_inside_the_replayed_ranges(p_bf16, heights):
    """Rows of one tile over ten chunks whose maxima are close, rise chunk by chunk, or lie up to 110 nats apart
    (some rescales underflow to 0); the later rows' windows start chunks later, so their first chunks are all
    masked. The double without O's rescale lies outside."""
    rng = np.random.default_rng(31 + p_bf16)
    d, group, n = 64, 2, 640
    q, k, v, scale = peaked_tile(rng, n, d, group, heights)
    qs = round_to(q[None] + 0.3 * rng.standard_normal((12, group, d)), "bf16")  # each row its own query
    firsts = np.array([0, 0, 5, 63, 64, 130, 200, 300, 390, 400, 500, 600])
    lasts = np.array([639, 620, 600, 639, 450, 639, 330, 639, 500, 639, 630, 639])
    outside = 0
    for rescale_o in (True, False):
        y, top = attend_tile(qs, k[:, 0], v[:, 0], firsts, lasts, 0, np.float32(scale), p_bf16, "natural",
                             rescale_o)
        got = round_to(y.astype(np.float64), "bf16")
        for i, (first, last) in enumerate(zip(firsts, lasts)):
            found = replay_row(qs[i], k[first:last + 1], v[first:last + 1], first, last, scale, 64, group,
                               order="online_mma", p_round="bf16" if p_bf16 else "none",
                               grouping="natural")
            lo, hi = found["out"]
            inside = (lo <= got[i]) & (got[i] <= hi)
            if rescale_o:
                assert np.all(inside), i
                assert np.array_equal(found["row_m"][0], top[i].astype(np.float64)), i
                assert np.mean(lo == hi) > 0.6, (i, np.mean(lo == hi))
            else:
                outside += int((~inside).sum())
    assert outside > 100, outside


def test_rows_replayed_together_in_the_online_order_get_the_bounds_each_gets_alone():
    rng = np.random.default_rng(12)
    d, group = 64, 2
    q, k, v, scale = bf16_row(rng, group, 400, d, k_rms=0.3)
    rows = [(round_to(q + 0.2 * rng.standard_normal(q.shape), "bf16"), k[first:pos + 1], v[first:pos + 1], first,
             pos, None) for first, pos in ((10, 300), (64, 383), (0, 290))]  # five chunks each
    together = replay_rows(rows, scale, 64, group, order="online_mma", p_round="bf16", grouping="natural")
    for row, got in zip(rows, together):
        alone = replay_row(*row[:5], scale, 64, group, order="online_mma", p_round="bf16",
                           grouping="natural")
        for name in ("out", "row_m"):
            assert all(np.array_equal(a, b) for a, b in zip(alone[name], got[name])), name


def exact_step(state, mc, lc, oc, expf):
    """One step of the online merge in exact rationals, each rounding to fp32; m_c = -inf leaves the state."""
    big_m, big_l, big_o = state
    if mc == -np.inf:
        return state
    new = max(big_m, mc)
    a = expf(np.float32(big_m - new)) if big_m > -np.inf else 0.0
    b = expf(np.float32(mc - new))
    big_l = fma32_exact(lc, b, rn32_exact(Fraction(big_l) * Fraction(a)))
    big_o = [fma32_exact(x, b, rn32_exact(Fraction(y) * Fraction(a)))
             for x, y in zip(oc, big_o)]
    return new, big_l, big_o


def chained_exact(m, l, o, expf, c0: int, chains: int):
    """The online merge of one row in `chains` chains (its chunk j is chunk c0 + j, in chain (c0 + j) % chains), the
    chains then merged in order as chunks, in exact rationals rounded to fp32 at each step: bf16(RN(O / L))."""
    states = [(-np.inf, 0.0, [0.0] * len(o[0]))] * chains
    for j, (mc, lc, oc) in enumerate(zip(m, l, o)):
        states[(c0 + j) % chains] = exact_step(states[(c0 + j) % chains], mc, lc, oc, expf)
    state = states[0]
    for chain in states[1:]:
        state = exact_step(state, *chain, expf)
    _, big_l, big_o = state
    return round_to(np.array([rn32_exact(Fraction(y) / Fraction(big_l)) for y in big_o]), "bf16")


def on_grid(m, l, o, c0s):
    """Rows' chunks (row r's chunk j is absolute chunk c0s[r] + j) as the double's chunks (c, m_c, l_c, o_c) over
    the absolute grid, [R, 1] and [R, 1, D] in fp32, unseen chunks m = -inf, l = o = 0."""
    r, nch, d = o.shape
    for c in range(min(c0s), max(c0s) + nch):
        j = c - np.array(c0s)
        seen = (j >= 0) & (j < nch)
        jj = np.clip(j, 0, nch - 1)
        at = np.arange(r)
        yield (c, np.where(seen, m[at, jj], -np.inf).astype(np.float32)[:, None],
               np.where(seen, l[at, jj], 0).astype(np.float32)[:, None],
               np.where(seen[:, None], o[at, jj], 0).astype(np.float32)[:, None])


@pytest.mark.parametrize("chains", [2, 3])
def test_the_chained_merge_replay_is_the_exact_fp32_order_and_bounds_every_expf_within_its_ulps(monkeypatch, chains):
    """Rows of 1 to 7 chunks replayed together, their first chunks in chains 0, 1 (and 2): each within the exact
    chained order for expf anywhere in its ulps, equal to it (and to the double's merge) for expf = RN32(exp)."""
    rng = np.random.default_rng(40 + chains)
    c0s = [0, 1, 2, 5, 8, 3]
    for nch in (1, 2, 5, 7):
        rows = [merge_inputs(rng, nch, 5) for _ in c0s]
        m, l, o = (np.stack([row[j] for row in rows]) for j in range(3))
        chain = (np.array(c0s)[:, None] + np.arange(nch)) % chains
        lo, hi = _merge_online(m, l, l, o, o, chain, chains)
        for r, c0 in enumerate(c0s):
            def pick(x):
                a, b = exp_interval(np.array([float(x)]))
                v = np.float32(a[0])
                for _ in range(int(rng.integers(0, 2 * replay.EXP_ULPS + 1))):
                    v = min(np.nextafter(v, np.float32(np.inf)), np.float32(b[0]))
                return float(v)

            got = chained_exact(m[r], l[r], o[r], pick, c0, chains)
            assert np.all((lo[r] <= got) & (got <= hi[r])), (nch, c0)
    monkeypatch.setattr(replay, "EXP_ULPS", 0)  # expf = RN32(exp): the interval is one value, the replay exact
    for nch in (1, 2, 5, 7):
        rows = [merge_inputs(rng, nch, 5) for _ in c0s]
        m, l, o = (np.stack([row[j] for row in rows]) for j in range(3))
        lo, hi = _merge_online(m, l, l, o, o, (np.array(c0s)[:, None] + np.arange(nch)) % chains, chains)
        big_m, big_l, big_o = online_merge(on_grid(m, l, o, c0s), (len(c0s), 1, 5), chains)
        double = round_to((big_o / big_l[..., None]).astype(np.float64)[:, 0], "bf16")
        assert np.array_equal(big_m[:, 0], m.max(axis=1)) and not np.isnan(double).any()
        for r, c0 in enumerate(c0s):
            want = chained_exact(m[r], l[r], o[r], lambda x: float(np.float32(np.exp(np.float64(x)))), c0, chains)
            assert np.array_equal(lo[r], want) and np.array_equal(hi[r], want), (nch, c0)
            assert np.array_equal(double[r], want), (nch, c0)


def test_two_chains_add_a_cancelling_sum_in_another_order():
    """Equal chunk maxima (every a and b exactly 1): O = 2^24 + 1.5 - 2^24 + 1.25 in chunk order is 3.25 in fp32,
    2.75 in two chains (2^24 - 2^24, then 1.5 + 1.25, or the other way round for a row starting in an odd chunk),
    4 in three (2^24 + 1.25 = 2^24 + 2, then + 1.5 = 2^24 + 4, then - 2^24)."""
    m, l = np.zeros((1, 4)), np.ones((1, 4))
    o = np.array([2.0**24, 1.5, -2.0**24, 1.25])[None, :, None]
    for chains, c0, want in ((1, 0, 3.25), (2, 0, 2.75), (2, 1, 2.75), (3, 0, 4.0)):
        chain = (c0 + np.arange(4))[None] % chains
        lo, hi = _merge_online(m, l, l, o, o, chain, chains)
        assert lo[0, 0] == hi[0, 0] == want / 4, (chains, c0)
        _, big_l, big_o = online_merge(on_grid(m, l, o, [c0]), (1, 1, 1), chains)
        assert big_l[0, 0] == 4 and big_o[0, 0, 0] == want, (chains, c0)


def fused_rows_in_tiles(rng, p_bf16: bool, heights: list[float], chains: int):
    """Rows of two tiles over ten chunks (one from chunk 0, one from chunk 1): windows starting in odd and even
    chunks, rows of one chunk, rows ending early; per row (q, first, last, out of the chained double, out of the
    one-chain double, row_m); and k, v, scale."""
    d, group, n = 64, 2, 640
    q, k, v, scale = peaked_tile(rng, n, d, group, heights)
    tiles = [(0, [0, 5, 63, 64, 130, 200, 300, 390, 400, 600, 0],
              [639, 600, 639, 450, 190, 250, 330, 500, 639, 639, 63]),
             (1, [64, 64, 100, 192, 250, 256, 320], [127, 639, 200, 639, 380, 300, 639])]
    found = []
    for c0, firsts, lasts in tiles:
        firsts, lasts = np.array(firsts), np.array(lasts)
        qs = round_to(q[None] + 0.3 * rng.standard_normal((len(firsts), group, d)), "bf16")
        args = (qs, k[64 * c0:, 0], v[64 * c0:, 0], firsts, lasts, c0, np.float32(scale), p_bf16, "natural", True)
        y, top = attend_tile(*args, chains)
        y1, top1 = attend_tile(*args)
        assert np.array_equal(top, top1)
        found += [(qs[i], firsts[i], lasts[i], y[i], y1[i], top[i]) for i in range(len(firsts))]
    return found, k, v, scale


@pytest.mark.parametrize("heights, chains", [([0] * 10, 2), ([0, 2, 1, 4, 3, 6, 5, 8, 7, 10], 2),
                                             ([5, 50, 10, 80, 0, 110, 20, 108, 3, 60], 2), ([0] * 10, 3)])
@pytest.mark.parametrize("p_bf16", [False, True])
def test_the_chained_doubles_results_lie_inside_the_chained_replay(p_bf16, heights, chains):
    """Rows whose windows start in odd and even chunks, rows of one chunk (every key in one chain), rows over
    several: the chained double's out inside the chained replay's range and its row_m the replay's; a row of one
    chunk gets the one-chain double's bits, most longer rows other fp32 values than it."""
    rng = np.random.default_rng(70 + p_bf16 + 2 * chains)
    rows, k, v, scale = fused_rows_in_tiles(rng, p_bf16, heights, chains)
    moved, longer, decided = 0, 0, []
    for q, first, last, y, y1, top in rows:
        found = replay_row(q, k[first:last + 1], v[first:last + 1], first, last, scale, 64, 2,
                           order="online_mma", p_round="bf16" if p_bf16 else "none", grouping="natural",
                           chains=chains)
        lo, hi = found["out"]
        got = round_to(y.astype(np.float64), "bf16")
        assert np.all((lo <= got) & (got <= hi)), (first, last)
        assert np.array_equal(found["row_m"][0], top.astype(np.float64)), (first, last)
        decided.append(np.mean(lo == hi))
        if first // 64 == last // 64:
            assert np.array_equal(y, y1), (first, last)
        else:
            longer += y.size
            moved += int((y != y1).sum())
    assert np.mean(decided) > 0.6, decided
    if heights == [0] * 10:  # comparable chunks: the chains' order shows in fp32
        assert moved > 0.2 * longer, (moved, longer)


def test_rows_replayed_together_in_chains_get_the_bounds_each_gets_alone(monkeypatch):
    """Five-chunk rows whose windows start in even and odd chunks, so their chunks sit in the chains differently:
    each row's chunk j merges in chain (first // 64 + j) % chains."""
    rng = np.random.default_rng(13)
    d, group = 64, 2
    q, k, v, scale = bf16_row(rng, group, 400, d, k_rms=0.3)
    rows = [(round_to(q + 0.2 * rng.standard_normal(q.shape), "bf16"), k[first:pos + 1], v[first:pos + 1], first,
             pos, None) for first, pos in ((10, 300), (64, 383), (0, 290), (70, 330), (130, 399))]
    merges = []

    def fold(states, m, *args):
        merges.append(np.broadcast_to(args[4], m.shape)[:, 0])  # the chain of each row's chunks
        return _fold_online(states, m, *args)

    monkeypatch.setattr(replay, "_fold_online", fold)
    for chains in (2, 3):
        together = replay_rows(rows, scale, 64, group, order="online_mma", p_round="bf16",
                               grouping="natural", chains=chains)
        assert np.array_equal(merges[-1], (np.array([[0], [1], [0], [1], [2]]) + np.arange(5)) % chains)
        for row, got in zip(rows, together):
            alone = replay_row(*row[:5], scale, 64, group, order="online_mma", p_round="bf16",
                               grouping="natural", chains=chains)
            for name in ("out", "row_m"):
                assert all(np.array_equal(a, b) for a, b in zip(alone[name], got[name])), (chains, name)


def test_the_reference_replays_the_declared_merge_chains():
    """q = 0 (every p exactly 1) and value chunks 2^10, 3 2^-14, -2^10, 3 2^-14: the order of the cancelling sum
    moves the replayed range, and the reference's range is the one of the declared chains."""
    d, n = 16, 256
    v = np.zeros((n, 1, d))
    v[0:64], v[64:128], v[128:192], v[192:256] = 2.0**10, 3 * 2.0**-14, -2.0**10, 3 * 2.0**-14
    k = np.random.default_rng(2).standard_normal((n, 1, d))
    row = RowData(pos=n - 1, first=0, q=rn_bits(np.zeros((2, d)), "bf16"), k=rn_bits(k, "bf16"), v=rn_bits(v, "bf16"))
    ranges = {}
    for chains in (1, 2):
        arith = Arithmetic(**(FUSED | {"prob_round": "bf16", "merge_chains": chains}))
        got = replayed_outputs([row], arith, 0.25, row_m=True)["out"]
        want = replay_row(row.q, row.k, row.v, row.first, row.pos, 0.25, 64, 2, order="online_mma",
                          p_round="bf16", grouping="natural", chains=chains)["out"]
        assert np.array_equal(got.lo[0], want[0]) and np.array_equal(got.hi[0], want[1]), chains
        ranges[chains] = (got.lo, got.hi)
    assert not np.array_equal(ranges[1][1], ranges[2][1])


def test_merge_chains_are_refused_outside_the_online_order():
    assert Arithmetic(**(FUSED | {"merge_chains": 8})).merge_chains == 8
    assert PromptSpec.model_validate(fused_spec(arithmetic=FUSED | {"merge_chains": 2})).arithmetic.merge_chains == 2
    mma = {"score": "mma_bf16", "score_order": "replay", "sum_order": "split_mma"}
    for fields, given in (({}, "any"), (mma, "split_mma")):
        with pytest.raises(ValueError, match=re.escape(f"merge_chains: 2 splits an online merge into chains: it needs "
                                                       f"sum_order: online_mma, given: sum_order: {given}")):
            Arithmetic(merge_chains=2, **fields)
    for n in (0, 9):
        with pytest.raises(ValueError, match="merge_chains"):
            Arithmetic(**(FUSED | {"merge_chains": n}))
    with pytest.raises(ValueError, match="merge chains belong to an online merge"):
        replay_row(np.zeros((2, 64)), np.zeros((10, 1, 64)), np.zeros((10, 1, 64)), 0, 9, 0.125, 256, 2,
                   order="split_chain", chains=2)


def fused_spec(**fields) -> dict:
    return {"abi": "fused", "shape": {"head_dim": 64, "q_heads": 4, "kv_heads": 2}, "arithmetic": dict(FUSED),
            "cases": [{"name": "c", "cache": {"kind": "linear", "length": 400},
                       "sequences": [{"start": 200, "rows": 70}, {"start": 0, "rows": 10}]}]} | fields


def test_a_fused_call_is_one_attend_launch_with_row_maxima_and_no_partials():
    f = AttentionPrompt("p", PromptSpec.model_validate(fused_spec()), 3)
    assert f.kernel_abi() == ATTEND_ARGS and f.kernel_abi()[7:9] == ("out", "row_m")
    assert [s.role for s in f.launch_shapes()] == ["attend"]
    problem = f.exactness("c")[0].problem
    assert set(problem.outputs) == {"out", "row_m"} and problem.outputs["row_m"].shape == (80, 4)
    assert "n_part" not in problem.scalars
    (launch,) = problem.launches
    # G = 2: tiles of 32 rows with both query heads of a key head; 70 rows take 3 tiles, 10 rows 1
    assert launch.role == "attend" and launch.grid == (4, 2, 1) and launch.args == ATTEND_ARGS
    inv = f.invariance(Suite.VARIANTS, "c")[0]
    assert inv.outputs == ("out", "row_m")
    labels = [variant.label for variant in inv.variants]
    assert "rerun" in labels and not any("n_part" in label for label in labels)
    split = AttentionPrompt("s", PromptSpec.model_validate(fused_spec(abi="split", arithmetic={})), 3)
    assert f.case_buffer_bytes("c") < split.case_buffer_bytes("c")  # no partials
    call = f.bench_calls({"keys": (1024,), "rows": (1,)})[0]
    assert call.label == "prompt d64 4/2 P32 fused" and set(call.outputs) == {"out", "row_m"}
    assert [launch.grid for launch in call.launches] == [(16, 2, 1)]  # 512 rows in tiles of 32, per key head


@pytest.mark.parametrize("fields, words", [
    ({"chunk": 256}, "it needs score_order: replay_natural, exp: expf, prob_round: none or bf16, div: ieee, "
                     "out: bf16, chunk: 64, no rescales"),
    ({"score_order": "replay"}, "it needs score_order: replay_natural"),
    ({"partials": "checked"}, "sum_order: online_mma merges online and writes no partials: it needs "
                              "partials: hidden"),
    ({"pv": "fp32"}, "sum_order: online_mma sums p times V on tensor cores: it needs pv: mma_bf16"),
    ({"prob_round": "bf16_numerator"}, "prob_round: none or bf16"),
    ({"sum_order": "split_mma", "partials": "checked"}, "it needs score_order: replay, exp: expf"),
    ({"score": "fp32", "sum_order": "any"}, "score_order: replay_natural replays tensor-core k-steps: it needs "
                                            "score: mma_bf16"),
])
def test_contradicting_arithmetic_is_refused_by_field(fields, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        Arithmetic(**(FUSED | fields))


@pytest.mark.parametrize("fields, words", [
    ({"arithmetic": {"score": "mma_bf16", "score_order": "replay", "sum_order": "split_mma"}},
     "abi: fused is one launch that merges online and writes no partials: it needs sum_order: online_mma "
     "and partials: hidden, given: sum_order: split_mma, partials: checked"),
    ({"abi": "split"}, "sum_order: online_mma is the fused kernel's order (one launch, an online merge): it "
                       "needs abi: fused"),
])
def test_an_abi_contradicting_its_order_is_refused(fields, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        PromptSpec.model_validate(fused_spec(**fields))


def test_a_decode_entry_cannot_declare_the_fused_order():
    with pytest.raises(ValueError, match="a decode entry cannot declare it"):
        DecodeSpec.model_validate({"shape": {"head_dim": 64, "q_heads": 2, "kv_heads": 1}, "arithmetic": FUSED,
                                   "cases": [{"name": "c", "cache": {"kind": "linear", "length": 100},
                                              "rows": [99]}]})


def test_a_fused_entry_needs_a_kernel_that_takes_the_fused_abi(tmp_path):
    path = tmp_path / "contract.yaml"
    path.write_text(f"""\
version: 1
seed: 1
entries:
  - name: p
    family: attention.prompt
    kernel: {{python: "tests.doubles.prompt:window_prompt"}}
    abi: fused
    shape: {{head_dim: 64, q_heads: 2, kv_heads: 1}}
    arithmetic: {json.dumps(FUSED)}
    cases:
      - {{name: c, cache: {{kind: linear, length: 300}}, sequences: [{{start: 100, rows: 20}}]}}
""")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    result = CliRunner().invoke(cli, ["check", "--contract", str(path)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "contract.yaml:6" in text and "row_m" in text and "cannot" in text, text
