"""The declared-order replay bounds a kernel that follows the order with any expf within 2 ulps."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from kcontract.families.attention.replay import replay_row
from kcontract.families.attention.tensorcore import replay_scores
from kcontract.numerics import add32, fma32, round_to
from kcontract.gatetable import Suite
from tests.helpers.decode_rows import bf16_row
from tests.oracles.fp32 import fma32_exact, rn32_exact


def test_fp32_adds_and_fmas_round_once():
    rng = np.random.default_rng(1)
    a = np.float32(rng.standard_normal(3000) * np.exp2(rng.integers(-30, 30, 3000))).astype(np.float64)
    b = round_to(rng.standard_normal(3000), "bf16")
    c = np.float32(rng.standard_normal(3000) * np.exp2(rng.integers(-30, 30, 3000))).astype(np.float64)
    want = [rn32_exact(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c)]
    assert [fma32_exact(x, y, z) for x, y, z in zip(a, b, c)] == want  # the fast oracle the replays below use
    assert np.array_equal(fma32(a, b, c), np.array(want))
    assert np.array_equal(add32(a, c), (a.astype(np.float32) + c.astype(np.float32)).astype(np.float64))


def key_groups(head_dim: int, group: int) -> int:
    """The split decode kernel's PV key groups, KG = 256 DT / D (DT = 8, 4 or 2 dims per thread for up to 4, 8, 16
    query heads per key head): this oracle's copy; the checker reads the kernel's own export."""
    return 256 * (8 if group <= 4 else 4 if group <= 8 else 2) // head_dim


def split_counts(head_dim: int, group: int) -> dict[str, int]:
    """What the split decode kernel exports for its order: key groups and 8 merge runs."""
    return {"pv_key_groups": key_groups(head_dim, group), "merge_runs": 8}


def kernel(q, k, v, first, pos, scale, group, rng, kg=None, runs=8, p_bf16=False):
    """The window_decode order (or, with kg=1, runs=1, window_prompt's) with expf off by a random -2..2 ulps: m, l,
    o per chunk and the bf16 output; p_bf16 rounds each p to bf16 before the sums."""
    f32 = np.float32
    hq, d = q.shape
    c0, c1 = first // 256, pos // 256
    outs = []
    for h in range(hq):
        g = h // group
        s = replay_scores(q[h:h + 1], k[:, g, :], scale)[0]
        ms, ls, os_ = [], [], []
        for c in range(c0, c1 + 1):
            keys = [j for j in range(256) if first <= 256 * c + j <= pos]
            idx = {j: 256 * c + j - first for j in keys}
            m = max(s[idx[j]] for j in keys)
            p = np.zeros(256)
            for j in keys:
                x = f32(s[idx[j]] - m)
                e = np.float32(np.exp(np.float64(x)))
                if x != 0:
                    for _ in range(abs(int(rng.integers(-2, 3)))):
                        e = np.nextafter(e, np.float32(np.inf) if rng.random() < 0.5 else np.float32(0))
                p[j] = round_to(np.float64(e), "bf16") if p_bf16 else np.float64(e)
            lanes = [f32(0)] * 32
            for i in range(8):
                lanes = [f32(lanes[t] + f32(p[32 * i + t])) for t in range(32)]
            for off in (16, 8, 4, 2, 1):
                lanes = [f32(lanes[t] + lanes[t ^ off]) for t in range(32)]
            groups = key_groups(d, group) if kg is None else kg
            kpg = 256 // groups
            o = None
            for grp in range(groups):
                acc = [0.0] * d
                for j in range(grp * kpg, (grp + 1) * kpg):
                    if j in idx:
                        acc = [fma32_exact(p[j], v[idx[j], g, dd], acc[dd])
                               for dd in range(d)]
                o = acc if o is None else [float(f32(f32(a) + f32(b))) for a, b in zip(o, acc)]
            ms.append(m), ls.append(float(lanes[0])), os_.append(o)
        big_m = max(ms)
        n = len(ms)
        per = -(-n // runs)
        big_l, big_o = f32(0), [f32(0)] * d
        for w in range(runs):
            run_l, run_o = 0.0, [0.0] * d
            for c in range(w * per, min(n, (w + 1) * per)):
                fx = f32(ms[c] - big_m)
                f = 1.0 if fx == 0 else float(np.nextafter(np.float32(np.exp(np.float64(fx))),
                                                           np.float32(0) if rng.random() < 0.5 else np.float32(9)))
                run_l = fma32_exact(f, ls[c], run_l)
                run_o = [fma32_exact(f, os_[c][dd], run_o[dd]) for dd in range(d)]
            big_l = f32(big_l + f32(run_l))
            big_o = [f32(a + f32(b)) for a, b in zip(big_o, run_o)]
        outs.append(round_to(np.array([np.float64(f32(o / big_l)) for o in big_o]), "bf16"))
    return np.stack(outs)


@pytest.mark.parametrize("d, group, n, first", [(128, 2, 400, 100), (128, 5, 300, 0)])
def test_the_replayed_range_holds_the_kernel_and_decides_nearly_all(d, group, n, first):
    rng = np.random.default_rng(d + n)
    q, k, v, scale = bf16_row(rng, group, n, d, k_rms=0.1)
    pos = first + n - 1
    got = kernel(q, k, v, first, pos, scale, group, rng)
    found = replay_row(q, k, v, first, pos, scale, 256, group, kernel=split_counts(d, group))
    lo, hi = found["out"]
    assert np.all((lo <= got) & (got <= hi))
    assert np.mean(lo == hi) > 0.95, np.mean(lo == hi)


@pytest.mark.parametrize("p_bf16", [False, True])
def test_the_prompt_order_replayed_holds_the_prompt_kernel(p_bf16):
    d, group, n, first = 128, 3, 600, 200
    rng = np.random.default_rng(7 + p_bf16)
    q, k, v, scale = bf16_row(rng, group, n, d, k_rms=0.1)
    pos = first + n - 1
    got = kernel(q, k, v, first, pos, scale, group, rng, kg=1, runs=1, p_bf16=p_bf16)
    lo, hi = replay_row(q, k, v, first, pos, scale, 256, group, order="split_chain",
                        p_round="bf16" if p_bf16 else "none")["out"]
    assert np.all((lo <= got) & (got <= hi))
    assert np.mean(lo == hi) > 0.95, np.mean(lo == hi)


def test_a_declaring_entry_gets_replayed_ranges_for_its_output_and_partials():
    """The entry declares the split order; its family reads the order's counts from the kernel's cubin."""
    from pathlib import Path

    from kcontract.contract.loader import load_contract
    from kcontract.builds.builds import Builds

    loaded = load_contract(str(Path(__file__).resolve().parent.parent / "contract.yaml"), import_kernels=False)
    entry = loaded.entry("decode_d128_g4_sliding")
    assert entry.family.spec.arithmetic.sum_order == "split_lanes"
    with pytest.raises(ValueError, match="its kernel must export them"):
        entry.family.checks(Suite.REALISTIC, entry.family.cases(Suite.REALISTIC)[0])[0].compute_reference()
    entry.family.exports = Builds.of(loaded).family_exports(entry.kernel.cuda, entry.family)
    assert entry.family.exports == split_counts(128, 4)
    checked = entry.family.checks(Suite.REALISTIC, entry.family.cases(Suite.REALISTIC)[0])[0]
    expected = {e.output: e for e in checked.compute_reference().expected}
    assert list(expected) == ["out", "part_m", "part_l", "part_o"]
    out = expected["out"]
    assert np.mean(out.lo == out.hi) > 0.9
    m = expected["part_m"]
    assert np.array_equal(m.lo[m.mask], m.hi[m.mask])  # every chunk maximum is known exactly


def test_a_long_head_dim_512_row_is_decided_where_the_order_free_bound_is_not():
    """4,096 keys, 16 heads, zero-mean v: the replayed order decides above 95 %, the order-free bound below 30 %."""
    from tests.helpers.decode_rows import Order, chunk_index, draw_row
    from kcontract.families.attention.bounds import decode_row_range
    from kcontract.numerics import expected_bounds

    rng = np.random.default_rng(3)
    n = 4096
    row = draw_row(rng, n, 16, 1, 512, v_mean=0.0, peaks=2)
    lo, hi = replay_row(row.q, row.k, row.v, row.first, row.first + n - 1, row.scale, 256, 16,
                        kernel=split_counts(512, 16))["out"]
    bound = decode_row_range(row.q, row.k, row.v, chunk_index(row.first, n, 256), row.scale,
                             Order(dot="mma", mma=True).arithmetic())
    b_lo, b_hi = expected_bounds(bound.center, bound.radius, "bf16")
    assert np.mean(lo == hi) > 0.95 and np.mean(b_lo == b_hi) < 0.3, (np.mean(lo == hi), np.mean(b_lo == b_hi))


def test_rows_replayed_together_get_the_bounds_each_gets_alone():
    from kcontract.families.attention.replay import replay_rows

    rng = np.random.default_rng(11)
    d, group, hk = 64, 2, 2
    n_all = 900
    k = round_to(rng.standard_normal((n_all, hk, d)) * 0.1, "bf16")
    v = round_to(rng.standard_normal((n_all, hk, d)), "bf16")
    scale = float(np.float32(1 / np.sqrt(d)))
    rows = []
    for pos in (700, 701, 740, 767):  # three chunks each: keys from 200
        q = round_to(rng.standard_normal((group * hk, d)), "bf16")
        rows.append((q, k[200:pos + 1], v[200:pos + 1], 200, pos, None))
    for order, p_round in (("split_chain", "bf16"), ("split_lanes", "none")):
        together = replay_rows(rows, scale, 256, group, order=order, p_round=p_round, kernel=split_counts(d, group))
        for row, got in zip(rows, together):
            alone = replay_row(*row[:5], scale, 256, group, order=order, p_round=p_round, kernel=split_counts(d, group))
            for name in ("m", "l", "o", "out"):
                assert all(np.array_equal(a, b) for a, b in zip(alone[name], got[name])), (order, name)


def prompt_mma_kernel(q, k, v, first, pos, scale, rng, p_bf16):
    """One head group of a prompt kernel with p times V on tensor cores, emulated with the H200 k-step model:
    o per chunk by k-steps over 16 keys (fp32 p as three bf16 parts), one merge chain, IEEE division, bf16."""
    from kcontract.numerics import kstep

    f32 = np.float32
    hq, d = q.shape
    s_all = replay_scores(q, k[:, 0, :], scale)
    out, partials = [], []
    for h in range(hq):
        ms, ls, os_ = [], [], []
        for c in range(first // 256, pos // 256 + 1):
            keys = [j for j in range(256) if first <= 256 * c + j <= pos]
            sv = {j: s_all[h, 256 * c + j - first] for j in keys}
            m = max(sv.values())
            p = np.zeros(256)
            for j in keys:
                x = f32(sv[j] - m)
                e = f32(np.exp(np.float64(x)))
                if x != 0 and rng.random() < 0.7:
                    e = np.nextafter(e, f32(np.inf) if rng.random() < 0.5 else f32(0))
                p[j] = round_to(np.float64(e), "bf16") if p_bf16 else np.float64(e)
            vv = np.zeros((256, d))
            for j in keys:
                vv[j] = v[256 * c + j - first, 0]
            lanes = [f32(0)] * 32
            for i in range(8):
                lanes = [f32(lanes[t] + f32(p[32 * i + t])) for t in range(32)]
            for off in (16, 8, 4, 2, 1):
                lanes = [f32(lanes[t] + lanes[t ^ off]) for t in range(32)]
            hi_part = round_to(p, "bf16")
            mid = round_to(p - hi_part, "bf16")
            parts = [p] if p_bf16 else [hi_part, mid, p - hi_part - mid]
            assert p_bf16 or np.array_equal(round_to(parts[2], "bf16"), parts[2])  # three bf16 parts hold p
            acc = np.zeros(d)
            for s0 in range(0, 256, 16):
                for part in parts:
                    a = np.broadcast_to(part[s0:s0 + 16], (d, 16))
                    acc = kstep(acc, a, vv[s0:s0 + 16].T)
            ms.append(m), ls.append(float(lanes[0])), os_.append(acc)
        big_m = max(ms)
        big_l, big_o = f32(0), np.zeros(d, np.float32)
        for mc, lc, oc in zip(ms, ls, os_):
            fx = f32(mc - big_m)
            f = 1.0 if fx == 0 else float(np.nextafter(f32(np.exp(np.float64(fx))),
                                                       f32(0) if rng.random() < 0.5 else f32(9)))
            big_l = f32(fma32_exact(f, float(lc), float(big_l)))
            big_o = np.array([fma32_exact(f, float(o), float(b))
                              for o, b in zip(oc, big_o)], np.float32)
        out.append(round_to((big_o / big_l).astype(np.float64), "bf16"))
        partials.append(np.stack(os_))
    return np.stack(out), np.stack(partials)


@pytest.mark.parametrize("p_bf16", [False, True])
def test_p_times_v_on_tensor_cores_stays_inside_its_interval_bound(p_bf16):
    d, group, n, first = 64, 2, 700, 150
    rng = np.random.default_rng(21 + p_bf16)
    q, k, v, scale = bf16_row(rng, group, n, d, k_rms=0.2)
    pos = first + n - 1
    got, o = prompt_mma_kernel(q, k, v, first, pos, scale, rng, p_bf16)
    found = replay_row(q, k, v, first, pos, scale, 256, group, order="split_mma",
                       p_round="bf16" if p_bf16 else "none")
    lo, hi = found["out"]
    assert np.all((lo <= got) & (got <= hi))
    assert np.mean(lo == hi) > 0.9, np.mean(lo == hi)
    o_lo, o_hi = found["o"]
    assert np.all((o_lo <= o) & (o <= o_hi))  # every chunk's o at fp32 resolution
