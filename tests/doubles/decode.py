"""A numpy fp32 split-chunk decode on the attention ABI: a partials kernel, then a merge kernel, row by row."""

from __future__ import annotations

import numpy as np

from kcontract.numerics import bf16_from_f32_bits

CHUNK = 256
CHUNKS_PER_BLOCK = 16  # chunks gathered and summed together (no effect on the bits)
SCORE_KEYS = 32  # keys per score product buffer (no effect on the bits)
LANES_PER_STEP = 32  # lanes weighed and added per step of o's sum (no effect on the bits)


def f32_of_bf16(bits: np.ndarray) -> np.ndarray:
    """float32 values of bf16 bit patterns."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def visible(pos: int, win: int) -> tuple[int, int]:
    """The ABI's visible keys [first, pos]."""
    return (max(0, pos - win + 1) if win > 0 else 0), pos


def group_heads(hq: int, hk: int) -> np.ndarray:
    """Key head of each query head: h // G."""
    return np.arange(hq) // (hq // hk)


def chunk_count(lo: int, hi: int, chunk: int) -> int:
    """Partials of a row whose keys are [lo, hi]."""
    return hi // chunk - lo // chunk + 1


def rescale(m: np.ndarray, l: np.ndarray, big_m: np.ndarray) -> np.ndarray:
    """Merge weight of each chunk: exp(m_c - M)."""
    return np.exp(m - big_m)


def chunk_order(n: int, b: int) -> np.ndarray:
    """Merge order: chunk order."""
    return np.arange(n)


class HeadLayout:
    """Query heads as [A, B] against key heads broadcast as [A, 1]: (Hk, G) when h // G, else (Hq, 1)."""

    def __init__(self, kmap: np.ndarray, qf: np.ndarray, hk: int):
        hq, d = qf.shape
        self.kmap = None if np.array_equal(kmap, group_heads(hq, hk)) else kmap
        self.q = qf.reshape(hk, hq // hk, d) if self.kmap is None else qf[:, None, :]

    def keys(self, x: np.ndarray) -> np.ndarray:
        """[..., Hk, D] -> [..., A, 1, D]."""
        return x[..., :, None, :] if self.kmap is None else x[..., self.kmap, None, :]


def chunk_sums(heads: HeadLayout, kf, vf, mask, scale, acc_round, exp=np.exp, score_round=None, prescale=None):
    """m, l, o of chunks kf, vf [nb, C, Hk, D]: off lanes score -inf, weigh 0 and add exact zeros.

    Hooks for controls: exp (the exp of s - m), score_round (applied to each scaled score), prescale (q * scale
    made before the dot products, this function's result replacing it; the scores are then not scaled again).
    """
    nb, chunk = mask.shape
    a, g, d = heads.q.shape
    q = heads.q if prescale is None else prescale(heads.q * scale)
    keys = kf.reshape(nb * chunk, *kf.shape[2:])
    s = np.empty((nb * chunk, a, g), np.float32)
    buf = np.empty((SCORE_KEYS, a, g, d), np.float32)
    for i in range(0, nb * chunk, SCORE_KEYS):
        part = buf[:len(keys[i:i + SCORE_KEYS])]
        np.multiply(heads.keys(keys[i:i + SCORE_KEYS]), q, out=part)
        np.sum(part, axis=-1, out=s[i:i + SCORE_KEYS])  # pairwise over D, the same for every key
    s = s.reshape(nb, chunk, a * g) * (scale if prescale is None else np.float32(1))
    if score_round is not None:
        s = score_round(s)
    s[~mask] = -np.inf
    m = s.max(axis=1)
    with np.errstate(invalid="ignore"):
        p = np.where(mask[..., None], exp(s - m[:, None, :]), np.float32(0))
    ph = p.reshape(nb, chunk, a, g, 1)
    if acc_round is None:
        return m, in_key_order(p), weighted_in_key_order(ph, heads, vf).reshape(nb, a * g, d)
    l = np.zeros((nb, a * g), np.float32)
    o = np.zeros((nb, a, g, d), np.float32)
    pv = np.empty_like(o)
    for lane in range(chunk):  # l and o add lane by lane, in key order, each rounded after every add
        l += p[:, lane]
        np.multiply(ph[:, lane], heads.keys(vf[:, lane]), out=pv)
        o += pv
        l[...] = acc_round(l)
        o[...] = acc_round(o)
    return m, l, o.reshape(nb, a * g, d)


def in_key_order(terms: np.ndarray) -> np.ndarray:
    """The fp32 sum over axis 1 (the lanes) from +0, one term after another in lane order, as a loop adds: numpy
    adds along an axis that is not the innermost one element after another (along the innermost, pairwise)."""
    if terms[:1, :1].size > 1:
        return np.add.reduce(terms, axis=1, initial=np.float32(0))
    total = np.zeros(terms[:, 0].shape, np.float32)
    for lane in range(terms.shape[1]):
        total += terms[:, lane]
    return total


def weighted_in_key_order(ph: np.ndarray, heads: HeadLayout, vf: np.ndarray) -> np.ndarray:
    """o: the sum over lanes of p v from +0 in key order, LANES_PER_STEP lanes at a time, each step's sum starting
    from the running one (never -0, so adding it to +0 changes no bit)."""
    nb, chunk, a, g = ph.shape[:4]
    step = LANES_PER_STEP
    buf = np.empty((nb, step + 1, a, g, vf.shape[-1]), np.float32)
    total = np.zeros((nb, a, g, vf.shape[-1]), np.float32)
    for lane in range(0, chunk, step):
        width = min(step, chunk - lane)
        part = buf[:, :width + 1]
        part[:, 0] = total
        np.multiply(ph[:, lane:lane + width], heads.keys(vf[:, lane:lane + width]), out=part[:, 1:])
        total = in_key_order(part)
    return total


def partial_chunks(qb, k_cache, v_cache, pos, slot, *, win, ring, scale, chunk=CHUNK, span=visible,
                   keep=None, key_heads=group_heads, count=chunk_count, acc_round=None, origin=0, **score_hooks):
    """One row's partials: m, l [n, Hq] and o [n, Hq, D] in fp32, from its keys alone; chunks start at
    multiples of `chunk` from position `origin` (0: absolute positions)."""
    hq, d = qb.shape
    hk = k_cache.shape[2]
    lo, hi = span(pos, win)
    n = max(0, count(lo - origin, hi - origin, chunk))
    lanes = ((lo - origin) // chunk + np.arange(n))[:, None] * chunk + np.arange(chunk) + origin  # slot j, lane i
    mask = (lanes >= lo) & (lanes <= hi)  # lanes off the row's keys are never read from the cache
    if keep is not None:
        mask &= keep(lanes, chunk)
    heads = HeadLayout(np.asarray(key_heads(hq, hk)), f32_of_bf16(qb), hk)
    m = np.empty((n, hq), np.float32)
    l = np.empty((n, hq), np.float32)
    o = np.empty((n, hq, d), np.float32)
    for j in range(0, n, CHUNKS_PER_BLOCK):
        sel = slice(j, j + CHUNKS_PER_BLOCK)
        kf, vf = (gathered(cache, slot, lanes[sel], mask[sel], ring) for cache in (k_cache, v_cache))
        m[sel], l[sel], o[sel] = chunk_sums(heads, kf, vf, mask[sel], np.float32(scale), acc_round, **score_hooks)
    return m, l, o


def gathered(cache: np.ndarray, slot: int, lanes: np.ndarray, mask: np.ndarray, ring: int) -> np.ndarray:
    """fp32 [chunks, C, Hk, D] of the slot's keys (or values) on the lanes the mask keeps, exact zeros elsewhere;
    where those lanes are one run (a row's keys), they are converted in place."""
    out = np.zeros(mask.shape + cache.shape[2:], np.float32)
    bits, on = out.reshape(-1, *cache.shape[2:]).view(np.uint32), np.flatnonzero(mask)
    at = lanes.reshape(-1)[on] % ring
    if not on.size or on[-1] - on[0] + 1 != on.size:  # lanes left out inside the row's keys
        bits[on] = f32_of_bf16(cache[slot, at]).view(np.uint32)
        return out
    if at[-1] - at[0] + 1 == on.size:  # not across the ring's end either: a view of the cache
        at = slice(at[0], at[-1] + 1)
    np.left_shift(cache[slot, at], np.uint32(16), out=bits[on[0]:on[-1] + 1], dtype=np.uint32)
    return out


def merge_chunks(m, l, o, b, *, factor=rescale, order=chunk_order):
    """One row's merge in fp32: sum f_c l_c and f_c o_c over its chunks, then O / L."""
    n, hq, d = o.shape
    if n == 0:
        return np.full((hq, d), np.nan, np.float32)
    with np.errstate(invalid="ignore"):
        f = factor(m, l, m.max(axis=0)).astype(np.float32)
        seq = list(order(n, b))
        big_l = f[seq[0]] * l[seq[0]]
        big_o = f[seq[0], :, None] * o[seq[0]]
        for c in seq[1:]:
            big_l = big_l + f[c] * l[c]
            big_o = big_o + f[c, :, None] * o[c]
        return big_o / big_l[:, None]


def decode_rows(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part,
                scale,
                chunk=CHUNK,  # keys per partial, at absolute positions
                span=visible,  # (pos, win) -> (lo, hi): the keys a row reads
                keep=None,  # (lanes, chunk) -> mask of the lanes kept, or None for all
                key_heads=group_heads,  # (hq, hk) -> key head of each query head
                count=chunk_count,  # (lo, hi, chunk) -> partial slots of the row
                acc_round=None,  # running sum -> its rounding after each add, or None
                factor=rescale,  # (m, l, M) -> merge weight of each chunk
                order=chunk_order,  # (n, batch index) -> the merge's chunk order
                to_out=bf16_from_f32_bits,  # fp32 O / L -> output bits
                **score_hooks):  # exp, score_round, prescale: see chunk_sums
    """Both kernels, with hooks for controls; partials past n_part (faulty counts only) stay private."""
    win, ring, n_part = int(win), int(ring), int(n_part)
    spill = []
    for b in range(len(row_pos)):
        m, l, o = partial_chunks(q[b], k_cache, v_cache, int(row_pos[b]), int(row_slot[b]), win=win, ring=ring,
                                 scale=scale, chunk=chunk, span=span, keep=keep, key_heads=key_heads,
                                 count=count, acc_round=acc_round, **score_hooks)
        k = min(len(m), n_part)
        part_m[b, :, :k] = m[:k].T
        part_l[b, :, :k] = l[:k].T
        part_o[b, :, :k] = o[:k].transpose(1, 0, 2)
        spill.append((len(m), m[k:].copy(), l[k:].copy(), o[k:].copy()))
    for b, (n, m_x, l_x, o_x) in enumerate(spill):  # the merge reads the workspace back
        k = n - len(m_x)
        m = np.concatenate([part_m[b, :, :k].T, m_x])
        l = np.concatenate([part_l[b, :, :k].T, l_x])
        o = np.concatenate([part_o[b, :, :k].transpose(1, 0, 2), o_x])
        out[b] = to_out(merge_chunks(m, l, o, b, factor=factor, order=order))


def window_decode(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part,
                  scale, kv_heads):
    """The correct double: C = 256, visible keys [first, pos], key head h // G, RN-even bf16 output."""
    hq, hk = q.shape[1], k_cache.shape[2]
    if hq % hk or hk != int(kv_heads):
        raise ValueError(f"q heads a multiple of key heads and kv_heads = {hk}, given {hq}, {hk} and {kv_heads}")
    need = max((chunk_count(*visible(int(p), int(win)), CHUNK) for p in row_pos), default=0)
    if need > int(n_part):
        raise ValueError(f"n_part {n_part} is below the {need} partials a row needs")
    decode_rows(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, win=win, ring=ring,
                n_part=n_part, scale=scale)
