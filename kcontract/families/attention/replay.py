"""Rigorous output ranges by replaying a declared order: a kernel's own fp32 roundings, step by step.

Scores are replayed bit for bit (tensorcore.py), so every chunk maximum and every exp argument is known
exactly; only expf is not (at most 2 ulps from exp, a third kept as margin). Every later step of the kernel is
an fp32 add or fma in a declared order, and each is monotone in its inputs, so running the kernel's order
twice, once with every p at the end of its interval that lowers the result and once at the end that raises
it, bounds the kernel's result: the width is what expf's freedom allows, nothing more.

The declared orders, named by how they sum: `split_lanes` (docs 6, the split decode kernel): l_c as lane sums
(lane L: keys L, L + 32, ... of the chunk, in order) then a xor butterfly; o_c as fma chains over KG contiguous
key groups added in group order; the merge in R runs of ceil(n / R) chunks, each an fma chain in chunk order from
0, the runs added in run order; IEEE division, then bf16. KG and R are the kernel's own, read from the constants
it exports (`pv_key_groups`, `merge_runs`), never copied here. `split_chain` (docs 8, the split prompt kernel):
as `split_lanes` with one o chain per chunk (KG = 1) and one merge run, p optionally rounded to bf16; `split_mma`
the same with p times V in tensor-core k-steps. `online_mma` (docs 8, the fused ABI): 64-key chunks, l_c in quads (_quad_sums), o_c in
tensor-core k-steps, and the merge online in chunk order (_merge_online), L and O carried as intervals; with
merge chains, chunk c (absolute) merges online into chain c % chains and the chains then merge in order as chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcontract.families.attention.bounds import as_float64, pv_parts
from kcontract.families.attention.tensorcore import replay_scores
from kcontract.numerics import functions, round_to
from kcontract.numerics.fp32 import add32, div_interval32, exp_interval32, fma32, rn32
from kcontract.numerics.mma_bounds import kstep_interval
from kcontract.numerics.tensorcore import STEP
from kcontract.numerics.xp import array_module, reference_module, to_device, to_host

EXP_ULPS = int(functions.EXP_ULPS["expf"] + functions.EXP_MARGIN_ULPS)  # expf's documented 2 ulps, and one more
KERNEL_FACTS = ("pv_key_groups", "merge_runs")  # what `split_lanes` reads from the kernel's exports


def exp_interval(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] fp32 bounds of expf(x) for fp32 x (EXP_ULPS, read at each call): 1 exactly at 0, 0 for masked keys."""
    return exp_interval32(x, EXP_ULPS)


@dataclass(frozen=True)
class Order:
    """How a declared order sums: l inside a chunk, o inside a chunk, and the merge of the chunks."""

    lanes: str  # l_c: "warp" (lane sums and a xor butterfly over 32 lanes) or "quad" (_quad_sums)
    key_groups: int | None  # o_c's fma chains per chunk; 0: tensor-core k-steps; None: the kernel's export
    runs: int | None  # the merge: runs of fma chains added in order (_merge); 0: online (_merge_online); None: export

    def of(self, kernel: dict[str, int] | None) -> "Order":
        """The order with the kernel's exported counts filled in; ValueError naming what the kernel must export."""
        kernel = kernel or {}
        missing = [name for name, value in zip(KERNEL_FACTS, (self.key_groups, self.runs))
                   if value is None and name not in kernel]
        if missing:
            raise ValueError(f"this order replays the kernel's own {' and '.join(missing)}: its kernel must export "
                             f"them (contract `exports`)")
        kg = kernel["pv_key_groups"] if self.key_groups is None else self.key_groups
        runs = kernel["merge_runs"] if self.runs is None else self.runs
        if kg < 0 or runs < 0 or (self.runs is None and runs == 0):
            raise ValueError(f"the kernel exports pv_key_groups {kg} and merge_runs {runs}: counts of chains")
        return Order(self.lanes, kg, runs)


ORDERS = {  # declared sum order -> how it sums
    "split_lanes": Order("warp", None, None),  # lane sums, the kernel's key groups and merge runs
    "split_chain": Order("warp", 1, 1),  # one chain per chunk, one merge run
    "split_mma": Order("warp", 0, 1),  # p times V in tensor-core k-steps of 16 keys, one merge run
    "online_mma": Order("quad", 0, 0),  # wgmma sums, an online merge
}


def chunk_grid(first: int, pos: int, chunk: int) -> np.ndarray:
    """[nch, chunk] key index (-1 off the row's keys) on the absolute chunk grid."""
    c0, c1 = first // chunk, pos // chunk
    lanes = (c0 + np.arange(c1 - c0 + 1))[:, None] * chunk + np.arange(chunk)
    return np.where((lanes >= first) & (lanes <= pos), lanes - first, -1)


def replay_row(q, k, v, first: int, pos: int, scale: float, chunk: int, group: int, xp=None, scores=None,
               order: str = "split_lanes", p_round: str = "none", grouping: str = "decode", chains: int = 1,
               kernel: dict[str, int] | None = None) -> dict:
    """Bounds of one row's partials, output and largest score under the declared order: {name: (lo, hi)} as host
    arrays (m, l [Hq, nch], o [Hq, nch, D], out [Hq, D], row_m [Hq]).

    xp (numpy or cupy, default the reference module: CuPy on a GPU) computes; scores: the row's scores [Hq, n]
    where the caller formed them already (exact fp32 values: replayed, or exact in any order), else replayed here
    in the k-step `grouping`; order: the declared sum order (ORDERS); p_round: "bf16" where the kernel rounds p
    to bf16 before both sums (RN is monotone, so the interval's ends round to its bounds); chains: the online
    merge's chains (chunk c, at absolute positions, in chain c % chains; merge_chains, docs 8.1).
    """
    return replay_rows([(q, k, v, first, pos, scores)], scale, chunk, group, xp, order, p_round, grouping,
                       chains=chains, kernel=kernel)[0]


ELEMENTS = 1 << 25  # values of a replay's largest array formed at once (rows x heads x chunks x keys x D)
WORKING_BYTES = 12 * 8 * ELEMENTS  # what a replay holds at once: at most a dozen float64 arrays of ELEMENTS


def replay_rows(rows: list[tuple], scale: float, chunk: int, group: int, xp=None, order: str = "split_lanes",
                p_round: str = "none", grouping: str = "decode", chains: int = 1,
                elements: int = ELEMENTS, kernel: dict[str, int] | None = None) -> list[dict]:
    """replay_row for rows (q, k, v, first, pos, scores or None) with the same number of chunks, replayed
    together along a leading row axis: each row's bounds are those it gets alone. The chunks' sums are formed
    for as many rows as `elements` allows at a time, and the merge, a loop over chunks, runs once for every row
    and head."""
    xp = reference_module() if xp is None else xp
    grids = [chunk_grid(first, pos, chunk) for _, _, _, first, pos, _ in rows]
    if len({g.shape[0] for g in grids}) != 1:
        raise ValueError("replay_rows takes rows with the same number of chunks")
    hq, d = np.asarray(rows[0][0]).shape
    hk = np.asarray(rows[0][1]).shape[1]
    nch = grids[0].shape[0]
    how = ORDERS[order].of(kernel)
    if chains != 1 and how.runs:
        raise ValueError(f"merge chains belong to an online merge (sum_order: online_mma), given: {chains} "
                         f"chains with sum_order: {order}")
    size = max(1, elements // (nch * d * max(chunk, STEP * group)))  # a k-step's terms: [R, G, nch, 16, D]
    copies = SharedCopies(xp)
    parts = [_chunk_sums(rows[i:i + size], grids[i:i + size], scale, group, hk, copies, how, p_round, grouping)
             for i in range(0, len(rows), size)]
    m, l_lo, l_hi, o_lo, o_hi = (xp.concatenate([part[j] for part in parts]) for j in range(5))  # [R, Hq, ...]
    if how.runs:
        y_lo, y_hi = _merge(m, l_lo, l_hi, o_lo, o_hi, how.runs)
    else:
        c0 = np.array([first // chunk for _, _, _, first, _, _ in rows])
        chain = (c0[:, None] + np.arange(nch)) % chains  # each row's chunks' chains at absolute positions
        y_lo, y_hi = _merge_online(m, l_lo, l_hi, o_lo, o_hi, xp.asarray(chain[:, None, :]), chains)
    top = m.max(axis=-1)  # the row's largest score: the online merge's final M, exact
    found = [{} for _ in rows]
    for name, lo, hi in (("m", m, m), ("l", l_lo, l_hi), ("o", o_lo, o_hi), ("out", y_lo, y_hi), ("row_m", top, top)):
        lo, hi = to_host(lo), to_host(hi)
        for r, f in enumerate(found):
            f[name] = (lo[r], hi[r])
    return found


class SharedCopies:
    """float64 copies in xp of rows' q, k and v: arrays that view one host buffer (a sequence's keys, cut at each
    row) share one copy of it, made on first use, of which each is a slice."""

    def __init__(self, xp):
        self.xp, self.copies = xp, {}

    def float64(self, a):
        """a as float64 values in xp (a view of its buffer's copy where a is rows of it)."""
        a = np.asarray(a)
        base, first = _rows_of(a)
        key = id(base)
        if key not in self.copies:
            self.copies[key] = (base, as_float64(to_device(base, self.xp)))  # the buffer kept: its id stays its own
        return self.copies[key][1][first:first + len(a)]


def _rows_of(a: np.ndarray) -> tuple[np.ndarray, int]:
    """(buffer, first row) where a is consecutive whole rows of a C-contiguous buffer, else (a, 0)."""
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    if base is a or not a.flags.c_contiguous or not base.flags.c_contiguous or base.dtype != a.dtype \
            or base.shape[1:] != a.shape[1:] or a.ndim == 0:
        return a, 0
    first, rest = divmod(a.ctypes.data - base.ctypes.data, base.strides[0])
    if rest or first < 0 or first + len(a) > len(base):
        return a, 0
    return base, first


def _chunk_sums(rows: list[tuple], grids: list[np.ndarray], scale: float, group: int, hk: int,
                copies: SharedCopies, how: "Order", p_round: str, grouping: str) -> tuple:
    """Each row's chunk maxima and the intervals of l_c and o_c in the declared order: m, l_lo, l_hi [R, Hq, nch]
    and o_lo, o_hi [R, Hq, nch, D] of xp."""
    xp = copies.xp
    on = xp.asarray(np.stack([g >= 0 for g in grids]))  # [R, nch, C]
    kg_n = how.key_groups
    lane_sums = _quad_sums if how.lanes == "quad" else _lane_sums
    heads = []
    for g in range(hk):
        at = slice(g * group, (g + 1) * group)
        s_rows, v_rows = [], []
        for (q, k, v, _, _, scores), grid in zip(rows, grids):
            idx = xp.asarray(np.maximum(grid, 0))
            kk = copies.float64(k)[:, g, :]
            if scores is None:
                s = replay_scores(copies.float64(q)[at], kk, scale, xp, grouping)
            else:
                s = to_device(np.ascontiguousarray(scores[at]), xp)  # [G, n] exact fp32
            s_rows.append(s[:, idx])
            v_rows.append(copies.float64(v)[:, g, :][idx])
        sg = xp.where(on[:, None], xp.stack(s_rows), -xp.inf)  # [R, G, nch, C]
        m = sg.max(axis=-1)
        with np.errstate(invalid="ignore"):
            x = xp.where(on[:, None], (sg - m[..., None]).astype(xp.float32).astype(xp.float64), -xp.inf)
        p_lo, p_hi = exp_interval(x)
        if p_round == "bf16":
            p_lo, p_hi = round_to(p_lo, "bf16"), round_to(p_hi, "bf16")
        vg = xp.where(on[..., None], xp.stack(v_rows), 0.0)  # [R, nch, C, D]
        if kg_n:
            o_lo, o_hi = _group_chains(p_lo, p_hi, vg, kg_n)
        else:
            o_lo, o_hi = _mma_steps(p_lo, p_hi, vg, parts=pv_parts(p_round))
        heads.append((m, lane_sums(p_lo), lane_sums(p_hi), o_lo, o_hi))
    return tuple(xp.concatenate([h[j] for h in heads], axis=1) for j in range(5))


def _lane_sums(p: np.ndarray) -> np.ndarray:
    """l: lane L adds keys L, L + 32, ... in order from 0, then the xor butterfly (offsets 16 .. 1)."""
    xp = array_module(p)
    lanes = xp.zeros(p.shape[:-1] + (32,))
    for i in range(p.shape[-1] // 32):
        lanes = add32(lanes, p[..., 32 * i:32 * i + 32])
    for off in (16, 8, 4, 2, 1):
        lanes = add32(lanes, lanes[..., xp.arange(32) ^ off])
    return lanes[..., 0]


def _quad_sums(p: np.ndarray) -> np.ndarray:
    """l as a wgmma accumulator holds p: thread c of a quad adds keys 8 t + 2 c + e (t outer, e = 0, 1 inner) in
    order from 0, then the quad's butterfly (xor 1, then xor 2); thread 0's sum."""
    xp = array_module(p)
    lanes = xp.zeros(p.shape[:-1] + (4,))
    for t in range(p.shape[-1] // 8):
        for e in (0, 1):
            lanes = add32(lanes, p[..., 8 * t + e:8 * t + 8:2])
    for off in (1, 2):
        lanes = add32(lanes, lanes[..., xp.arange(4) ^ off])
    return lanes[..., 0]


def _group_chains(p_lo, p_hi, vg, kg_n: int):
    """o: per key group an fma chain in key order from 0, the groups added in order; (lower, upper).
    p [R, G, nch, C] and vg [R, nch, C, D]."""
    xp = array_module(p_lo)
    c = p_lo.shape[-1]
    kpg = c // kg_n
    ends = []
    for lower in (True, False):
        total = None
        for grp in range(kg_n):
            acc = xp.zeros(p_lo.shape[:-1] + (vg.shape[-1],))
            for i in range(grp * kpg, (grp + 1) * kpg):
                vi = vg[:, None, :, i, :]  # [R, 1, nch, D]
                p = xp.where((vi >= 0) == lower, p_lo[..., i, None], p_hi[..., i, None])
                acc = fma32(p, vi, acc)
            total = acc if total is None else add32(total, acc)
        ends.append(total)
    return ends[0], ends[1]


def _mma_steps(p_lo, p_hi, vg, parts: int):
    """o on tensor cores: per chunk, k-steps over keys 16 s .. 16 s + 15 in order from 0 (`parts` k-steps each:
    1 for bf16 p, 3 for fp32 p as exact bf16 hi + mid + lo), each bounded by an interval (mma_bounds.kstep_interval,
    which says why the k-step is not replayed at the ends of p's intervals); (lower, upper)."""
    xp = array_module(p_lo)
    lo = xp.zeros(p_lo.shape[:-1] + (vg.shape[-1],))  # [R, G, nch, D]
    hi = xp.zeros_like(lo)
    for s0 in range(0, p_lo.shape[-1], STEP):
        keys = slice(s0, s0 + STEP)
        lo, hi = kstep_interval(lo, hi, p_lo[..., keys, None], p_hi[..., keys, None], vg[:, None, :, keys, :], parts)
    return lo, hi


def _merge(m, l_lo, l_hi, o_lo, o_hi, runs: int):
    """out bounds: `runs` runs of fma chains over chunks in order, runs added in order, O / L, bf16.
    m and l [..., nch], o [..., nch, D]."""
    xp = array_module(m)
    nch = m.shape[-1]
    f_lo, f_hi = exp_interval((m - m.max(axis=-1, keepdims=True)).astype(xp.float32).astype(xp.float64))
    per = -(-nch // runs)
    sums = []
    for lower in (True, False):
        big_l, big_o = xp.zeros(m.shape[:-1] + (1,)), xp.zeros(o_lo.shape[:-2] + o_lo.shape[-1:])
        for w in range(runs):
            run_l, run_o = xp.zeros_like(big_l), xp.zeros_like(big_o)
            for c in range(w * per, min(nch, (w + 1) * per)):
                run_l = fma32((f_lo if lower else f_hi)[..., c:c + 1], (l_lo if lower else l_hi)[..., c:c + 1], run_l)
                oc = (o_lo if lower else o_hi)[..., c, :]
                f = xp.where((oc >= 0) == lower, f_lo[..., c:c + 1], f_hi[..., c:c + 1])
                run_o = fma32(f, oc, run_o)
            big_l, big_o = add32(big_l, run_l), add32(big_o, run_o)
        sums.append((big_l, big_o))
    (l_small, o_small), (l_big, o_big) = sums
    return _quotient(l_small, o_small, l_big, o_big)


def _merge_online(m, l_lo, l_hi, o_lo, o_hi, chain=None, chains: int = 1):
    """out bounds of the online merge in chunk order (_online_steps), then O / L, bf16. m and l [..., nch], o [...,
    nch, D]; with `chains` > 1, `chain` (broadcast to m) gives each chunk's chain: each chain merges its own chunks
    online, then the chains are merged in chain order as chunks (M_k, L_k, O_k) by the same step.

    A chain's M_k is exact (the largest of its m_c) and its L_k and O_k are intervals; the step is monotone in l_c
    and o_c as it is in L and O, so the chain merge carries the intervals on as the chunk merge does.
    """
    if chains == 1:
        return _quotient(*_online_steps(m, l_lo, l_hi, o_lo, o_hi))
    xp = array_module(m)
    states = []
    for k in range(chains):
        mine = xp.broadcast_to(xp.asarray(chain) == k, m.shape)
        part = (xp.where(mine, m, -xp.inf), xp.where(mine, l_lo, 0.0), xp.where(mine, l_hi, 0.0),
                xp.where(mine[..., None], o_lo, 0.0), xp.where(mine[..., None], o_hi, 0.0))
        states.append((part[0].max(axis=-1, keepdims=True),) + _online_steps(*part))
    tops, l_small, l_big = (xp.concatenate([s[j] for s in states], axis=-1) for j in (0, 1, 3))  # [..., chains]
    o_small, o_big = (xp.stack([s[j] for s in states], axis=-2) for j in (2, 4))  # [..., chains, D]
    return _quotient(*_online_steps(tops, l_small, l_big, o_small, o_big))


def _online_steps(m, l_lo, l_hi, o_lo, o_hi):
    """The online merge's ends of L [..., 1] and O [..., D] as (l_small, o_small, l_big, o_big), from M = -inf,
    L = O = 0 in chunk order: per chunk M' = max(M, m_c), a = expf(RN(M - M')), b = expf(RN(m_c - M')),
    L = fma(l_c, b, RN(L a)), O = fma(o_c, b, RN(O a)), M = M'. m and l [..., nch], o [..., nch, D]; a chunk with
    m_c = -inf (unseen: l_c = o_c = 0) leaves the state as it is.

    Every m_c is exact, so a and b are expf of exact arguments (exactly 1 at 0, exactly 0 at -inf: the first
    chunk's a, an unseen chunk's b). L and O are carried as intervals: each step is monotone in L, O, l_c and o_c,
    and in a and b (both >= 0) by the sign of what they multiply, so the lower end takes x_lo (y_lo if x_lo >= 0
    else y_hi) for each product x y, the upper x_hi (y_hi if x_hi >= 0 else y_lo); products of fp32 values are
    exact in float64.
    """
    xp = array_module(m)
    running = m.copy()  # M after each chunk: the running maximum, exact
    for c in range(1, m.shape[-1]):
        running[..., c] = xp.maximum(running[..., c - 1], m[..., c])
    before = xp.concatenate([xp.full(m.shape[:-1] + (1,), -xp.inf), running[..., :-1]], axis=-1)
    with np.errstate(invalid="ignore"):  # -inf - -inf before the first seen chunk: a and b are 0 there (L = O = 0)
        a = exp_interval(xp.where(xp.isneginf(before), -xp.inf, rn32(before - running)))  # RN in float64 is RN32
        b = exp_interval(xp.where(xp.isneginf(m), -xp.inf, rn32(m - running)))
    big_l = [xp.zeros(m.shape[:-1] + (1,)) for _ in range(2)]  # [lower, upper]
    big_o = [xp.zeros(o_lo.shape[:-2] + o_lo.shape[-1:]) for _ in range(2)]
    for c in range(m.shape[-1]):
        a_c, b_c = (a[0][..., c:c + 1], a[1][..., c:c + 1]), (b[0][..., c:c + 1], b[1][..., c:c + 1])
        for end, (l_c, o_c) in enumerate(((l_lo, o_lo), (l_hi, o_hi))):
            lower = end == 0
            big_l[end] = fma32(l_c[..., c:c + 1], b_c[end], rn32(big_l[end] * a_c[end]))
            oc, acc = o_c[..., c, :], big_o[end]
            b_at = xp.where((oc >= 0) == lower, b_c[0], b_c[1])
            a_at = xp.where((acc >= 0) == lower, a_c[0], a_c[1])
            big_o[end] = fma32(oc, b_at, rn32(acc * a_at))
    return big_l[0], big_o[0], big_l[1], big_o[1]


def _quotient(l_small, o_small, l_big, o_big):
    """bf16 bounds of RN32(O / L) for O in [o_small, o_big] and L in [l_small, l_big], L > 0."""
    y_lo, y_hi = div_interval32(o_small, o_big, l_small, l_big)
    return round_to(y_lo, "bf16"), round_to(y_hi, "bf16")
