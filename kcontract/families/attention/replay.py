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
from kcontract.families.attention.budget import working_values
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


# float64 values a row's chunk holds while a piece's chunk sums form, per kind of array: a k-step's terms [G, 16, D]
# (about six such at once), the chunk's values [C, D] (three), its scores and p [G, C] (a dozen), the piece's sums of
# every head [Hq, D + 3] (four)
TERMS, VALUES, SCORES, SUMS = 6, 3, 12, 4


def sum_values(hq: int, group: int, d: int, chunk: int) -> int:
    """float64 values a row's chunk holds while the chunk sums of a piece form."""
    return TERMS * group * STEP * d + VALUES * chunk * d + SCORES * group * chunk + SUMS * hq * (d + 3)


def kept_values(hq: int, d: int, online: bool) -> int:
    """float64 values a row's chunk holds until its block merges: its chunk sums, where the merge is not online
    (an online merge folds each piece in as it forms, keeping a state of [Hq, D] per row and chain)."""
    return 0 if online else 2 * hq * (d + 3)


def cut(n: int, nch: int, hq: int, group: int, d: int, chunk: int, online: bool, values: int) -> tuple[int, int]:
    """(rows, chunks): a block's rows (of n), merged together, and a piece's chunks, whose sums form together, so
    the block's kept sums and a piece's working arrays fit `values` float64 values (a row's kept sums alone may
    not). Kept sums take at most half of it, so pieces stay long; an online merge keeps none, so its block is as
    many rows as a chunk's sums fit, and the merge's loop over chunks runs for as few blocks as it can."""
    per_row, unit = nch * kept_values(hq, d, online), sum_values(hq, group, d, chunk)
    rows = min(n, max(1, min(values // (2 * per_row), values // (per_row + unit)) if per_row else values // unit))
    return rows, min(nch, max(1, (values - rows * per_row) // (rows * unit)))


def replay_rows(rows: list[tuple], scale: float, chunk: int, group: int, xp=None, order: str = "split_lanes",
                p_round: str = "none", grouping: str = "decode", chains: int = 1,
                values: int | None = None, kernel: dict[str, int] | None = None, partials: bool = True) -> list[dict]:
    """replay_row for rows (q, k, v, first, pos, scores or None) with the same number of chunks, replayed
    together along a leading row axis: each row's bounds are those it gets alone. The rows go in blocks, each
    block's chunks in pieces (cut), within `values` float64 values (default: budget.working_values(), numpy's on
    the host); a block's bounds are gathered on the device and copied to the host once at the end. Without
    `partials` a row's bounds leave out m, l and o (a kernel that hides them)."""
    xp = reference_module() if xp is None else xp
    grids = [chunk_grid(first, pos, chunk) for _, _, _, first, pos, _ in rows]
    if len({g.shape[0] for g in grids}) != 1:
        raise ValueError("replay_rows takes rows with the same number of chunks")
    hq, d = np.asarray(rows[0][0]).shape
    how = ORDERS[order].of(kernel)
    if chains != 1 and how.runs:
        raise ValueError(f"merge chains belong to an online merge (sum_order: online_mma), given: {chains} "
                         f"chains with sum_order: {order}")
    nch = grids[0].shape[0]
    values = working_values(xp is np) if values is None else values
    size, piece = cut(len(rows), nch, hq, group, d, chunk, not how.runs, values)
    plan = Replay(scale, chunk, group, how, p_round, grouping, chains, SharedCopies(xp))
    found = Gathered(xp, len(rows), hq, d, nch, partials)
    for i in range(0, len(rows), size):
        plan.block(rows[i:i + size], grids[i:i + size], piece, found, i)
    return found.rows()


class Gathered:
    """Every row's bounds on the device in fp32 (each one an fp32 value: exact), filled a block at a time and copied
    to the host once: out [R, Hq, D], row_m [R, Hq] and, with partials, m and l [R, Hq, nch] and o [R, Hq, nch, D]."""

    def __init__(self, xp, n: int, hq: int, d: int, nch: int, partials: bool):
        shapes = {"out": (n, hq, d), "row_m": (n, hq)}
        if partials:
            shapes.update(m=(n, hq, nch), l=(n, hq, nch), o=(n, hq, nch, d))
        self.ends = {name: (xp.empty(shape, xp.float32),) if name in ("m", "row_m") else
                     (xp.empty(shape, xp.float32), xp.empty(shape, xp.float32)) for name, shape in shapes.items()}

    def put(self, name: str, rows: slice, chunks: slice | None, *ends) -> None:
        """Rows (and chunks) of an output's ends (one for m and row_m, else lo and hi)."""
        if name in self.ends:
            at = (rows,) if chunks is None else (rows, slice(None), chunks)
            for target, value in zip(self.ends[name], ends):
                target[at] = value

    def rows(self) -> list[dict]:
        """{name: (lo, hi)} per row as float64 host arrays."""
        host = {name: [to_host(a).astype(np.float64) for a in ends] for name, ends in self.ends.items()}
        n = len(host["out"][0])
        return [{name: (ends[0][r], ends[-1][r]) for name, ends in host.items()} for r in range(n)]


@dataclass
class Replay:
    """How a replay_rows call replays: its order and the float64 copies its rows share."""

    scale: float
    chunk: int
    group: int
    how: Order
    p_round: str
    grouping: str
    chains: int
    copies: "SharedCopies"

    def block(self, rows: list[tuple], grids: list[np.ndarray], piece: int, found: Gathered, first: int) -> None:
        """A block of rows: its chunk sums a piece of chunks at a time, merged (online: folded in piece by piece),
        its bounds put in `found` from row `first`."""
        xp = self.copies.xp
        hq, d = np.asarray(rows[0][0]).shape
        nch, at = grids[0].shape[0], slice(first, first + len(rows))
        kept = None if not self.how.runs else (xp.empty((len(rows), hq, nch)), xp.empty((len(rows), hq, nch)),
                                                 xp.empty((len(rows), hq, nch)), xp.empty((len(rows), hq, nch, d)),
                                                 xp.empty((len(rows), hq, nch, d)))
        c0 = np.array([first_key // self.chunk for _, _, _, first_key, _, _ in rows])
        states, top = None, None
        for c in range(0, nch, piece):
            part = slice(c, min(nch, c + piece))
            m, l_lo, l_hi, o_lo, o_hi = _chunk_sums(rows, [g[part] for g in grids], self)
            found.put("m", at, part, m)
            found.put("l", at, part, l_lo, l_hi)
            found.put("o", at, part, o_lo, o_hi)
            top = m.max(axis=-1) if top is None else xp.maximum(top, m.max(axis=-1))
            if kept is not None:
                for target, value in zip(kept, (m, l_lo, l_hi, o_lo, o_hi)):
                    target[:, :, part] = value
            else:
                chain = (c0[:, None] + np.arange(part.start, part.stop)) % self.chains  # chains at absolute positions
                states = _fold_online(states, m, l_lo, l_hi, o_lo, o_hi, xp.asarray(chain[:, None, :]), self.chains)
        y_lo, y_hi = _merge(*kept, self.how.runs) if kept is not None else _finish_online(states)
        found.put("out", at, None, y_lo, y_hi)
        found.put("row_m", at, None, top)  # the row's largest score: the online merge's final M, exact


class SharedCopies:
    """Copies in xp of rows' q, k and v: arrays that view one host buffer (a sequence's keys, cut at each row)
    share one copy of it, made on first use, of which each is a slice; float64, or as given (bf16 bits: a quarter
    of the bytes) where a replay converts what it gathers."""

    def __init__(self, xp):
        self.xp, self.copies, self.given = xp, {}, {}

    def float64(self, a):
        """a as float64 values in xp (a view of its buffer's copy where a is rows of it)."""
        a = np.asarray(a)
        base, first = _rows_of(a)
        key = id(base)
        if key not in self.copies:
            self.copies[key] = (base, as_float64(to_device(base, self.xp)))  # the buffer kept: its id stays its own
        return self.copies[key][1][first:first + len(a)]

    def rows_of(self, a):
        """(a's buffer in xp as given, a's first row in it): one copy per buffer."""
        a = np.asarray(a)
        base, first = _rows_of(a)
        key = id(base)
        if key not in self.given:
            self.given[key] = (base, to_device(base, self.xp))
        return self.given[key][1], first


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


def _gathered_values(rows: list[tuple], grids: list[np.ndarray], g: int, copies: SharedCopies):
    """[R, nch, C, D] float64 values of the grids' keys (key 0 off a row's keys) of key head g: one gather per
    buffer the rows view, converted to float64 once."""
    xp = copies.xp
    by_buffer: dict[int, list[int]] = {}
    where = []
    for r, (row, grid) in enumerate(zip(rows, grids)):
        buffer, first = copies.rows_of(row[2])
        by_buffer.setdefault(id(buffer), []).append(r)
        where.append((buffer, first + np.maximum(grid, 0)))
    parts = []
    for members in by_buffer.values():
        buffer = where[members[0]][0]
        idx = xp.asarray(np.stack([where[r][1] for r in members]))
        parts.append((members, buffer[:, g, :][idx]))
    if len(parts) == 1:
        return as_float64(parts[0][1])
    out = xp.empty((len(rows),) + parts[0][1].shape[1:], parts[0][1].dtype)
    for members, got in parts:
        out[xp.asarray(members)] = got
    return as_float64(out)


def _gathered_scores(rows: list[tuple], grids: list[np.ndarray], at: slice, replay: Replay):
    """[R, G, nch, C] scores of the grids' keys for the query heads `at`: the rows' own (gathered on the host,
    copied once), or replayed over each row's keys of these chunks."""
    xp = replay.copies.xp
    if all(row[5] is not None for row in rows):
        return to_device(np.stack([row[5][at][:, np.maximum(grid, 0)] for row, grid in zip(rows, grids)]), xp)
    found = []
    for (q, k, _, _, _, scores), grid in zip(rows, grids):
        lo, hi = int(grid[grid >= 0].min()), int(grid.max())
        if scores is None:
            keys, first = replay.copies.rows_of(k)
            kk = as_float64(keys[first + lo:first + hi + 1, at.start // replay.group, :])
            s = replay_scores(replay.copies.float64(q)[at], kk, replay.scale, xp, replay.grouping)
        else:
            s = to_device(np.ascontiguousarray(scores[at, lo:hi + 1]), xp)
        found.append(s[:, xp.asarray(np.maximum(grid - lo, 0))])
    return xp.stack(found)


def _chunk_sums(rows: list[tuple], grids: list[np.ndarray], replay: Replay) -> tuple:
    """Each row's chunk maxima and the intervals of l_c and o_c in the declared order: m, l_lo, l_hi [R, Hq, nch]
    and o_lo, o_hi [R, Hq, nch, D] of xp."""
    xp, how, group = replay.copies.xp, replay.how, replay.group
    hq, d = np.asarray(rows[0][0]).shape
    on = xp.asarray(np.stack([g >= 0 for g in grids]))  # [R, nch, C]
    lane_sums = _quad_sums if how.lanes == "quad" else _lane_sums
    shape = (len(rows), hq, grids[0].shape[0])
    sums = tuple(xp.empty(shape) for _ in range(3)) + tuple(xp.empty(shape + (d,)) for _ in range(2))
    for g in range(hq // group):
        at = slice(g * group, (g + 1) * group)
        sg = xp.where(on[:, None], _gathered_scores(rows, grids, at, replay), -xp.inf)  # [R, G, nch, C]
        m = sg.max(axis=-1)
        with np.errstate(invalid="ignore"):
            x = xp.where(on[:, None], (sg - m[..., None]).astype(xp.float32).astype(xp.float64), -xp.inf)
        del sg
        p_lo, p_hi = exp_interval(x)
        if replay.p_round == "bf16":
            p_lo, p_hi = round_to(p_lo, "bf16"), round_to(p_hi, "bf16")
        vg = xp.where(on[..., None], _gathered_values(rows, grids, g, replay.copies), 0.0)  # [R, nch, C, D]
        if how.key_groups:
            o_lo, o_hi = _group_chains(p_lo, p_hi, vg, how.key_groups)
        else:
            o_lo, o_hi = _mma_steps(p_lo, p_hi, vg, parts=pv_parts(replay.p_round))
        for target, value in zip(sums, (m, lane_sums(p_lo), lane_sums(p_hi), o_lo, o_hi)):
            target[:, at] = value
    return sums


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
    return _finish_online(_fold_online(None, m, l_lo, l_hi, o_lo, o_hi, chain, chains))


def _fold_online(states, m, l_lo, l_hi, o_lo, o_hi, chain=None, chains: int = 1) -> list:
    """Each chain's online state (M, L, O: _online_steps) after the chunks given, from `states` (None: before the
    first chunk); chunks come in pieces in chunk order, and a piece at a time folds in as the whole would."""
    xp = array_module(m)
    states = states or [None] * chains
    if chains == 1:
        return [_online_steps(m, l_lo, l_hi, o_lo, o_hi, states[0])]
    found = []
    for k, state in enumerate(states):
        mine = xp.broadcast_to(xp.asarray(chain) == k, m.shape)
        found.append(_online_steps(xp.where(mine, m, -xp.inf), xp.where(mine, l_lo, 0.0), xp.where(mine, l_hi, 0.0),
                                   xp.where(mine[..., None], o_lo, 0.0), xp.where(mine[..., None], o_hi, 0.0), state))
    return found


def _finish_online(states: list):
    """out bounds from the chains' states: one chain's L and O, or the chains merged in chain order as chunks."""
    if len(states) == 1:
        _, big_l, big_o = states[0]
        return _quotient(big_l[0], big_o[0], big_l[1], big_o[1])
    xp = array_module(states[0][0])
    tops, l_small, l_big = (xp.concatenate([s[j][i] if j else s[0] for s in states], axis=-1)
                            for j, i in ((0, 0), (1, 0), (1, 1)))  # [..., chains]
    o_small, o_big = (xp.stack([s[2][i] for s in states], axis=-2) for i in (0, 1))  # [..., chains, D]
    _, big_l, big_o = _online_steps(tops, l_small, l_big, o_small, o_big)
    return _quotient(big_l[0], big_o[0], big_l[1], big_o[1])


def _online_steps(m, l_lo, l_hi, o_lo, o_hi, state=None):
    """The online merge's state (M [..., 1], [L_lo, L_hi] [..., 1], [O_lo, O_hi] [..., D]) after the chunks given
    in chunk order, from `state` (None: M = -inf, L = O = 0): per chunk M' = max(M, m_c), a = expf(RN(M - M')),
    b = expf(RN(m_c - M')), L = fma(l_c, b, RN(L a)), O = fma(o_c, b, RN(O a)), M = M'. m and l [..., nch], o [...,
    nch, D]; a chunk with m_c = -inf (unseen: l_c = o_c = 0) leaves the state as it is.

    Every m_c is exact, so a and b are expf of exact arguments (exactly 1 at 0, exactly 0 at -inf: the first
    chunk's a, an unseen chunk's b). L and O are carried as intervals: each step is monotone in L, O, l_c and o_c,
    and in a and b (both >= 0) by the sign of what they multiply, so the lower end takes x_lo (y_lo if x_lo >= 0
    else y_hi) for each product x y, the upper x_hi (y_hi if x_hi >= 0 else y_lo); products of fp32 values are
    exact in float64.
    """
    xp = array_module(m)
    if state is None:
        state = (xp.full(m.shape[:-1] + (1,), -xp.inf), [xp.zeros(m.shape[:-1] + (1,)) for _ in range(2)],
                 [xp.zeros(o_lo.shape[:-2] + o_lo.shape[-1:]) for _ in range(2)])
    top, big_l, big_o = state[0], list(state[1]), list(state[2])
    running = m.copy()  # M after each chunk: the running maximum, exact
    running[..., 0] = xp.maximum(top[..., 0], m[..., 0])
    for c in range(1, m.shape[-1]):
        running[..., c] = xp.maximum(running[..., c - 1], m[..., c])
    before = xp.concatenate([top, running[..., :-1]], axis=-1)
    with np.errstate(invalid="ignore"):  # -inf - -inf before the first seen chunk: a and b are 0 there (L = O = 0)
        a = exp_interval(xp.where(xp.isneginf(before), -xp.inf, rn32(before - running)))  # RN in float64 is RN32
        b = exp_interval(xp.where(xp.isneginf(m), -xp.inf, rn32(m - running)))
    for c in range(m.shape[-1]):
        a_c, b_c = (a[0][..., c:c + 1], a[1][..., c:c + 1]), (b[0][..., c:c + 1], b[1][..., c:c + 1])
        for end, (l_c, o_c) in enumerate(((l_lo, o_lo), (l_hi, o_hi))):
            lower = end == 0
            big_l[end] = fma32(l_c[..., c:c + 1], b_c[end], rn32(big_l[end] * a_c[end]))
            oc, acc = o_c[..., c, :], big_o[end]
            b_at = xp.where((oc >= 0) == lower, b_c[0], b_c[1])
            a_at = xp.where((acc >= 0) == lower, a_c[0], a_c[1])
            big_o[end] = fma32(oc, b_at, rn32(acc * a_at))
    return running[..., -1:], big_l, big_o


def _quotient(l_small, o_small, l_big, o_big):
    """bf16 bounds of RN32(O / L) for O in [o_small, o_big] and L in [l_small, l_big], L > 0."""
    y_lo, y_hi = div_interval32(o_small, o_big, l_small, l_big)
    return round_to(y_lo, "bf16"), round_to(y_hi, "bf16")
