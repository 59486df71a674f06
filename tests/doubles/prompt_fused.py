"""A numpy double of the fused prompt kernel (abi: fused, sum_order: online_mma): per tile of 64 / G rows of
one sequence and key head (with its G query heads), the tile's 64-key chunks at absolute positions in order,
scores and p times V by the tensor-core k-step model, l in quads, the online merge in fp32 (in one chain or in
several, merge_chains); hooks for planted faults."""

from __future__ import annotations

import numpy as np

from kcontract.families.attention.replay import fma32
from kcontract.families.attention.tensorcore import replay_scores
from kcontract.numerics.tensorcore import STEP, kstep
from kcontract.numerics import bf16_from_f32_bits, round_to

from .decode import f32_of_bf16
from .prompt import row_spans

TILE = 64  # wgmma rows per block: TILE // G rows of one sequence, each with a key head's G query heads
CHUNK = 64  # keys per chunk, at absolute positions
F32 = np.float32


def quad_sums(p: np.ndarray) -> np.ndarray:
    """l_c of p [..., 64] (fp32): thread c of a quad adds keys 8 t + 2 c + e (t outer, e inner) from 0, then the
    quad's butterfly (xor 1, then xor 2); thread 0's sum."""
    lanes = np.zeros(p.shape[:-1] + (4,), F32)
    for t in range(p.shape[-1] // 8):
        for e in (0, 1):
            lanes = lanes + p[..., 8 * t + e:8 * t + 8:2]
    for off in (1, 2):
        lanes = lanes + lanes[..., np.arange(4) ^ off]
    return lanes[..., 0]


def bf16_parts(p: np.ndarray, p_bf16: bool) -> list[np.ndarray]:
    """p as the bf16 A operands of its k-steps: p itself (bf16 P), or hi, mid, lo that add to the fp32 p exactly."""
    p = p.astype(np.float64)
    if p_bf16:
        return [p]
    hi = round_to(p, "bf16")
    mid = round_to(p - hi, "bf16")
    return [hi, mid, p - hi - mid]


def pv_steps(p: np.ndarray, v: np.ndarray, p_bf16: bool, steps_backwards: bool = False) -> np.ndarray:
    """o_c [..., D] of p [..., 64] and v [64, D]: k-steps over keys 16 s .. 16 s + 15 in order from 0 (a planted
    fault: from the last one back), each part of p in turn."""
    acc = np.zeros(p.shape[:-1] + (v.shape[1],))
    parts = bf16_parts(p, p_bf16)
    for s0 in range(0, p.shape[-1], STEP)[::-1 if steps_backwards else 1]:
        b = v[s0:s0 + STEP].T  # [D, 16]: broadcast by the k-step against each part's [..., 1, 16]
        for part in parts:
            acc = kstep(acc, part[..., None, s0:s0 + STEP], b)
    return acc.astype(F32)


def attend_tile(qf, kf, vf, firsts, lasts, c0: int, scale, p_bf16: bool, grouping: str, rescale_o: bool,
                chains: int = 1, backwards: bool = False, steps_backwards: bool = False):
    """One tile and key head: qf [T, G, D], kf and vf [n, D] (float64 values) for keys 64 c0 .., firsts and lasts
    [T]; returns out [T, G, D] and row_m [T, G] in fp32. Chunks no row of the tile sees are skipped, chunks a row
    does not see leave its state as it is."""
    chunks = tile_chunks(qf, kf, vf, firsts, lasts, c0, scale, p_bf16, grouping, steps_backwards)
    if backwards:  # a planted fault: the key tiles walked from the last one back
        chunks = reversed(list(chunks))
    big_m, big_l, big_o = online_merge(chunks, qf.shape, chains, rescale_o)
    return big_o / big_l[..., None], big_m


def tile_chunks(qf, kf, vf, firsts, lasts, c0: int, scale, p_bf16: bool, grouping: str, steps_backwards=False):
    """(c, m_c, l_c, o_c) of each chunk some row of the tile sees, in increasing absolute c: m_c and l_c [T, G],
    o_c [T, G, D] in fp32 (m_c = -inf, l_c = o_c = 0 where a row sees none of the chunk)."""
    t, g, d = qf.shape
    for c in range(c0, int(lasts.max()) // CHUNK + 1):
        pos = c * CHUNK + np.arange(CHUNK)
        seen = (pos[None] >= firsts[:, None]) & (pos[None] <= lasts[:, None])  # [T, 64]
        if not seen.any():
            continue
        keys = slice((c - c0) * CHUNK, (c - c0 + 1) * CHUNK)
        s = replay_scores(qf.reshape(t * g, d), kf[keys], float(scale), grouping=grouping).astype(F32)
        s = np.where(seen[:, None], s.reshape(t, g, CHUNK), F32(-np.inf))
        m = s.max(axis=-1)  # -inf where the row sees none of the chunk
        with np.errstate(invalid="ignore"):
            x = s - m[..., None]  # fp32 RN
        p = np.where(seen[:, None], np.exp(x.astype(np.float64)).astype(F32), F32(0))
        if p_bf16:
            p = round_to(p.astype(np.float64), "bf16").astype(F32)
        yield c, m, quad_sums(p), pv_steps(p, vf[keys], p_bf16, steps_backwards)


def online_merge(chunks, shape: tuple, chains: int = 1, rescale_o: bool = True):
    """(M, L, O) in fp32 of chunks (c, m_c, l_c, o_c) over rows of `shape` [T, G, D]: chunk c merges online into
    chain c % chains (absolute c) from (-inf, 0, 0), then chain 0's state takes chains 1 .. chains - 1 in order
    by the same step."""
    t, g, d = shape
    states = [(np.full((t, g), -np.inf, F32), np.zeros((t, g), F32), np.zeros((t, g, d), F32))
              for _ in range(chains)]
    for c, m, l_c, o_c in chunks:
        states[c % chains] = merge_step(*states[c % chains], m, l_c, o_c, rescale_o)
    big_m, big_l, big_o = states[0]
    for chain in states[1:]:
        big_m, big_l, big_o = merge_step(big_m, big_l, big_o, *chain, rescale_o)
    return big_m, big_l, big_o


def merge_step(big_m, big_l, big_o, m, l_c, o_c, rescale_o: bool):
    """The online merge's step of (M, L, O) with a chunk (or a chain) (m, l_c, o_c), fp32: M' = max(M, m),
    a = expf(RN(M - M')) (0 while M = -inf), b = expf(RN(m - M')), L = fma(l_c, b, RN(L a)),
    O = fma(o_c, b, RN(O a)); m = -inf (l_c = o_c = 0) leaves the state as it is."""
    new = np.maximum(big_m, m)
    started = new > -np.inf  # the row has seen a key by now
    with np.errstate(invalid="ignore"):
        a = np.where(started, np.exp((big_m - new).astype(np.float64)).astype(F32), F32(1))
        b = np.where(m > -np.inf, np.exp((m - new).astype(np.float64)).astype(F32), F32(0))
    f64 = lambda x: x.astype(np.float64)  # noqa: E731
    big_l = fma32(f64(l_c), f64(b), f64(big_l * a)).astype(F32)  # fma32: one rounding of the exact l b + L a
    carried = big_o * a[..., None] if rescale_o else big_o
    big_o = fma32(f64(o_c), f64(b)[..., None], f64(carried)).astype(F32)
    return new, big_l, big_o


def fused_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, *, win, ring, scale,
               p_bf16: bool, grouping: str = "natural", rescale_o: bool = True, chains: int = 1,
               backwards: bool = False, steps_backwards: bool = False):
    """The fused kernel, tile by tile: each sequence's rows in tiles of TILE // G, every key head's G query heads;
    `chains` online merge chains (merge_chains)."""
    hq, d = q.shape[1], q.shape[2]
    hk = k_cache.shape[2]
    g = hq // hk
    spans = list(row_spans(seq_row0, seq_pos0, row_last, int(win)))
    for s in range(len(seq_pos0)):
        for t0 in range(int(seq_row0[s]), int(seq_row0[s + 1]), TILE // g):
            tile = [span for span in spans if t0 <= span[0] < min(t0 + TILE // g, int(seq_row0[s + 1]))]
            rows = np.array([b for b, *_ in tile])
            firsts = np.array([span[3] for span in tile])
            lasts = np.array([span[4] for span in tile])
            c0 = int(firsts.min()) // CHUNK
            pos = c0 * CHUNK + np.arange((int(lasts.max()) // CHUNK + 1 - c0) * CHUNK)
            stored = (pos >= firsts.min()) & (pos <= lasts.max())  # keys the tile may read; the rest weigh 0
            qf = f32_of_bf16(q[rows]).astype(np.float64)
            for kh in range(hk):
                kf = np.zeros((len(pos), d))
                vf = np.zeros((len(pos), d))
                kf[stored] = f32_of_bf16(k_cache[int(seq_slot[s]), pos[stored] % int(ring), kh])
                vf[stored] = f32_of_bf16(v_cache[int(seq_slot[s]), pos[stored] % int(ring), kh])
                heads = slice(kh * g, (kh + 1) * g)
                y, top = attend_tile(qf[:, heads], kf, vf, firsts, lasts, c0, F32(scale), p_bf16, grouping,
                                     rescale_o, chains, backwards, steps_backwards)
                out[rows, heads] = bf16_from_f32_bits(y.astype(F32))
                row_m[rows, heads] = top


def _checked(q, k_cache, seq_pos0, kv_heads, n_seq) -> None:
    hq, hk = q.shape[1], k_cache.shape[2]
    if hq % hk or hk != int(kv_heads) or len(seq_pos0) != int(n_seq):
        raise ValueError(f"q heads a multiple of key heads, kv_heads = {hk} and n_seq = {len(seq_pos0)}, given "
                         f"{hq}, {hk}, {kv_heads} and {n_seq}")


def window_prompt_fused_p32(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, *, win, ring,
                            scale, kv_heads, n_seq):
    """The correct double, P32: p in fp32, three bf16 parts per k-step of p times V."""
    _checked(q, k_cache, seq_pos0, kv_heads, n_seq)
    fused_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, win=win, ring=ring,
               scale=scale, p_bf16=False)


def window_prompt_fused_bf16(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, *, win, ring,
                             scale, kv_heads, n_seq):
    """The correct double, bf16 P: p rounded to bf16 before l and p times V."""
    _checked(q, k_cache, seq_pos0, kv_heads, n_seq)
    fused_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, win=win, ring=ring,
               scale=scale, p_bf16=True)


def window_prompt_fused_p32_chains2(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, *, win,
                                    ring, scale, kv_heads, n_seq):
    """The correct double, P32, in two merge chains (merge_chains: 2): even chunks in one, odd in the other."""
    _checked(q, k_cache, seq_pos0, kv_heads, n_seq)
    fused_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, win=win, ring=ring,
               scale=scale, p_bf16=False, chains=2)


def window_prompt_fused_bf16_chains2(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, *, win,
                                     ring, scale, kv_heads, n_seq):
    """The correct double, bf16 P, in two merge chains (merge_chains: 2): even chunks in one, odd in the other."""
    _checked(q, k_cache, seq_pos0, kv_heads, n_seq)
    fused_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, win=win, ring=ring,
               scale=scale, p_bf16=True, chains=2)
