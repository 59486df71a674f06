"""Planted-fault decodes: the double's core with one hook changed each, named for the gate that catches it."""

from __future__ import annotations

import hashlib

import numpy as np

from kcontract.numerics import bf16_from_f32_bits, to_bits, truncate_to

from .decode import CHUNK, decode_rows, f32_of_bf16, rescale, visible


def _planted(**hooks):
    """Turn `per_batch(batch) -> extra hooks` into a decode with window_decode's signature and its docstring."""

    def wrap(per_batch):
        def fn(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
               kv_heads):
            extra = per_batch(q.shape[0])
            decode_rows(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, win=win, ring=ring,
                        n_part=n_part, scale=scale, **hooks, **extra)

        fn.__name__, fn.__qualname__, fn.__doc__ = per_batch.__name__, per_batch.__qualname__, per_batch.__doc__
        return fn

    return wrap


def _bf16_running(x: np.ndarray) -> np.ndarray:
    """A running fp32 sum rounded to bf16 (RN-even)."""
    return f32_of_bf16(bf16_from_f32_bits(x))


def _truncated(x: np.ndarray) -> np.ndarray:
    """bf16 bits of fp32 values rounded toward zero."""
    return to_bits(truncate_to(x.astype(np.float64), "bf16"), "bf16")


@_planted(factor=lambda m, l, big_m: np.ones_like(m))
def merge_without_rescale(batch):
    """Gate 3: the merge sums l_c and o_c without the exp(m_c - M) factor."""
    return {}


@_planted(acc_round=_bf16_running)
def bf16_accumulation(batch):
    """Gate 4: l and o add key by key with the running sums rounded to bf16 after every add."""
    return {}


@_planted(span=lambda pos, win: (visible(pos, win)[0], pos - 1))
def last_key_dropped(batch):
    """Gate 4: the row's last key (pos) is not seen."""
    return {}


@_planted(keep=lambda lanes, chunk: lanes % chunk != 0)
def first_key_of_chunk_skipped(batch):
    """Gate 4: the first key of every 256-key chunk is skipped."""
    return {}


@_planted(key_heads=lambda hq, hk: np.arange(hq) % hk)
def key_head_mismap(batch):
    """Gate 4: query head h reads key head h % Hk instead of h // G."""
    return {}


@_planted()
def chunk_from_batch(batch):
    """Gate 2: chunks of 128 keys when the batch has more than 4 rows, else 256."""
    return {"chunk": 128 if batch > 4 else CHUNK}


@_planted(order=lambda n, b: np.roll(np.arange(n), -b))
def order_dependent_merge(batch):
    """Gate 2: row b merges its chunks starting at chunk b % n and wrapping (an atomic merge's order)."""
    return {}


@_planted(to_out=_truncated)
def truncated_output(batch):
    """Gate 1: the fp32 output is truncated to bf16 (toward zero) instead of rounded to nearest-even."""
    return {}


_SEEN: set[bytes] = set()  # the inputs this task has launched on


def race_on_repeat(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
                   kv_heads):
    """Gate 1 on a later trial only: the output is truncated when the inputs were launched on before (a race that
    shows on some launches, not the first)."""
    key = hashlib.sha256(q.tobytes() + np.asarray(row_pos).tobytes()).digest()
    hooks = {"to_out": _truncated} if key in _SEEN else {}
    _SEEN.add(key)
    decode_rows(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, win=win, ring=ring,
                n_part=n_part, scale=scale, **hooks)


def _one_early(pos: int, win: int) -> tuple[int, int]:
    """Keys from first - 1 when a window cuts the row."""
    first, last = visible(pos, win)
    return (first - 1 if win > 0 and first > 0 else first), last


@_planted(span=_one_early)
def window_one_early(batch):
    """Gate 4: a windowed row also sees the key just before its window (first - 1)."""
    return {}


def _unguarded(m: np.ndarray, l: np.ndarray, big_m: np.ndarray) -> np.ndarray:
    """exp(m_c - M) times l_c / l_c: 1 for a real chunk, NaN for an empty one."""
    with np.errstate(invalid="ignore"):
        return rescale(m, l, big_m) * (l / l)


@_planted(count=lambda lo, hi, chunk: (hi + 1) // chunk - lo // chunk + 1, factor=_unguarded)
def empty_chunk_nan(batch):
    """Gate 3: rows ending on a chunk's last key get an empty extra chunk (m = -inf, l = 0) that merges as NaN."""
    return {}


def _exp_off_by_1e4(x: np.ndarray) -> np.ndarray:
    """exp with a relative error of 1e-4 (about 840 fp32 ulps) everywhere but at 0."""
    return np.where(x == 0, np.float32(1), np.exp(x) * np.float32(1 + 1e-4)).astype(np.float32)


def _bf16_values(x: np.ndarray) -> np.ndarray:
    """fp32 values rounded to bf16 (RN-even), kept in fp32."""
    return f32_of_bf16(bf16_from_f32_bits(x))


@_planted(exp=_exp_off_by_1e4)
def exp_error_1e4(batch):
    """Gate 4 (mirror C's partials): exp off by a relative 1e-4; O / L hides it, l_c and o_c do not."""
    return {}


@_planted(score_round=_bf16_values)
def bf16_scores(batch):
    """Gate 4 (mirror C): each scaled score rounded to bf16."""
    return {}


@_planted(prescale=_bf16_values)
def prescaled_q_bf16(batch):
    """Gate 4 (mirror C): q * scale rounded to bf16 before the dot products."""
    return {}


def _prompt(**hooks):
    """A planted-fault prompt with window_prompt's signature."""
    from .prompt import prompt_rows

    def fn(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, part_m, part_l, part_o, out, *, win, ring,
           n_part, scale, kv_heads, n_seq):
        prompt_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, part_m, part_l, part_o, out,
                    win=win, ring=ring, n_part=n_part, scale=scale, **hooks)

    return fn


prompt_image_rows_causal = _prompt(last=lambda pos, given: pos)  # image rows see only up to themselves
prompt_image_one_past = _prompt(last=lambda pos, given: given + 1 if given > pos else given)
prompt_causal_off_by_one = _prompt(last=lambda pos, given: given + 1 if given == pos else given)
prompt_tiles_from_chunk_start = _prompt(origin=lambda seq_pos0: seq_pos0)  # chunks counted from the call's row
prompt_bf16_p = _prompt(exp=lambda x: _bf16_values(np.exp(x)))  # p rounded to bf16 in a kernel declared P32
prompt_merge_without_rescale = _prompt(factor=lambda m, l, big_m: np.ones_like(m))


def _fused(**hooks):
    """A planted-fault fused prompt (P32) with window_prompt_fused_p32's signature."""
    from .prompt_fused import fused_rows

    def fn(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, *, win, ring, scale, kv_heads,
           n_seq):
        fused_rows(q, k_cache, v_cache, seq_row0, seq_pos0, seq_slot, row_last, out, row_m, win=win, ring=ring,
                   scale=scale, p_bf16=False, **hooks)

    return fn


fused_decode_grouping = _fused(grouping="decode")  # scores in the decode kernel's k-step grouping of head dims
fused_without_rescale = _fused(rescale_o=False)  # the online merge adds o_c b to O without scaling O by a
fused_backwards_merge = _fused(backwards=True)  # the online merge walks the key tiles from the last one back
fused_steps_backwards = _fused(steps_backwards=True)  # each chunk's p times V k-steps from the last one back
