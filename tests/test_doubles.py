"""The numpy decode double against float64, its row independence, and each planted control's fault."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kcontract.numerics import from_bits, rn_bits
from tests.doubles import controls
from tests.doubles.decode import CHUNK, chunk_count, visible, window_decode

NAN16 = 0x7FFF  # the launcher's bf16 poison: every cache row a row must not read holds it
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Row:
    """One row: q bits [Hq, D] and its visible k/v bits [n, Hk, D] for positions first..pos."""

    pos: int
    first: int
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray


def draw(rng, pos, win, hq, hk, d, v_fill=None) -> Row:
    """Scores about N(0, 1), values with a per-column mean so outputs stay away from zero."""
    first = visible(pos, win)[0]
    n = pos - first + 1
    q = rng.standard_normal((hq, d))
    k = rng.standard_normal((n, hk, d))
    v = rng.standard_normal((n, hk, d)) * 0.5 + rng.choice([-1.0, 1.0], size=(hk, d))
    if v_fill is not None:
        v = np.broadcast_to(np.asarray(v_fill, float)[None, :, None], (n, hk, d))
    return Row(pos, first, rn_bits(q, "bf16"), rn_bits(k, "bf16"), rn_bits(v, "bf16"))


def lay(rows, win, ring, slots=None, n_part=None, extra_slots=0):
    """ABI buffers for rows; every cache row outside a row's [first, pos] and the workspace hold NaN."""
    hq, d = rows[0].q.shape
    hk = rows[0].k.shape[1]
    slots = list(range(len(rows))) if slots is None else slots
    k_cache = np.full((max(slots) + 1 + extra_slots, ring, hk, d), NAN16, np.uint16)
    v_cache = k_cache.copy()
    for row, s in zip(rows, slots):
        at = np.arange(row.first, row.pos + 1) % ring
        k_cache[s, at], v_cache[s, at] = row.k, row.v
    need = max(chunk_count(*visible(r.pos, win), CHUNK) for r in rows)
    n_part = need if n_part is None else n_part
    b = len(rows)
    return dict(q=np.stack([r.q for r in rows]), k_cache=k_cache, v_cache=v_cache,
                row_pos=np.array([r.pos for r in rows], np.int32), row_slot=np.array(slots, np.int32),
                part_m=np.full((b, hq, n_part), np.nan, np.float32),
                part_l=np.full((b, hq, n_part), np.nan, np.float32),
                part_o=np.full((b, hq, n_part, d), np.nan, np.float32), out=np.full((b, hq, d), NAN16, np.uint16),
                win=win, ring=ring, n_part=n_part, scale=np.float32(1 / np.sqrt(d)), kv_heads=hk)


OUTPUTS = ("part_m", "part_l", "part_o", "out")


def run(fn, args):
    """Call a decode on read-only inputs and fresh copies of the outputs; return the outputs."""
    args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    for k, v in args.items():
        if isinstance(v, np.ndarray) and k not in OUTPUTS:
            v.flags.writeable = False
    fn(**args)
    return {k: args[k] for k in OUTPUTS}


def reference(row: Row, scale) -> np.ndarray:
    """float64 softmax(scale q k^T) v of one row, [Hq, D]."""
    q, k, v = (from_bits(x, "bf16") for x in (row.q, row.k, row.v))
    g = q.shape[0] // k.shape[1]
    out = np.empty_like(q)
    for h in range(q.shape[0]):
        s = float(scale) * (k[:, h // g] @ q[h])
        p = np.exp(s - s.max())
        out[h] = p @ v[:, h // g] / p.sum()
    return out


def bits_equal(a, b) -> bool:
    """Bitwise equality of two arrays of the same dtype."""
    return a.shape == b.shape and a.tobytes() == b.tobytes()


CONFIGS = {  # name: (hq, hk, d, win, ring, positions)
    "linear": (4, 2, 64, 0, 1100, [0, 1, 255, 256, 700, 1099]),
    "ring-g3": (6, 2, 32, 300, 320, [5, 299, 300, 511, 2000, 2047]),
    "ring-g5-tight": (10, 2, 16, 257, 257, [256, 257, 600, 1023]),
    "g3-one-key-head": (3, 1, 32, 0, 600, [17, 513, 599]),
    "g5-three-key-heads": (15, 3, 16, 0, 520, [0, 511, 519]),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_matches_float64_reference(name):
    hq, hk, d, win, ring, positions = CONFIGS[name]
    rng = np.random.default_rng(len(name))
    rows = [draw(rng, p, win, hq, hk, d) for p in positions]
    args = lay(rows, win, ring)
    got = from_bits(run(window_decode, args)["out"], "bf16")
    for b, row in enumerate(rows):
        ref = reference(row, args["scale"])
        floor = np.sqrt(np.mean(ref**2, axis=-1, keepdims=True)) * 2.0**-4
        assert np.all(np.abs(got[b] - ref) < 2.0**-7 * np.maximum(np.abs(ref), floor)), (name, row.pos)


@pytest.mark.parametrize("hq,hk", [(6, 2), (9, 3), (15, 3), (10, 2), (5, 1)])
def test_query_head_reads_key_head_h_over_g(hq, hk):
    rng = np.random.default_rng(hq * 7 + hk)
    rows = [draw(rng, p, 0, hq, hk, 16, v_fill=np.arange(1, hk + 1)) for p in (3, 300)]
    out = from_bits(run(window_decode, lay(rows, 0, 400))["out"], "bf16")
    want = (np.arange(hq) // (hq // hk) + 1.0)[None, :, None]
    assert np.array_equal(out, np.broadcast_to(want, out.shape))


@pytest.mark.parametrize("win,ring", [(0, 900), (300, 300), (260, 333)])
def test_bits_independent_of_batch_index_slot_ring_and_n_part(win, ring):
    rng = np.random.default_rng(win + ring)
    hq, hk, d = 6, 2, 32
    positions = [0, 255, 256, 599, 767] if win == 0 else [40, 299, 512, 1535, 4000]
    rows = [draw(rng, p, win, hq, hk, d) for p in positions]
    fillers = [draw(rng, p, win, hq, hk, d) for p in (3, 700, 511)]
    batch = fillers[:1] + rows[::-1] + fillers[1:]
    big = lay(batch, win, ring + 137, slots=[7, 1, 5, 0, 3, 2, 6, 4], n_part=9, extra_slots=2)
    together = run(window_decode, big)
    for i, row in enumerate(rows):
        b = len(rows) - i
        count = chunk_count(*visible(row.pos, win), CHUNK)
        alone = run(window_decode, lay([row], win, max(ring, row.pos + 1) if win == 0 else win))
        assert bits_equal(alone["out"][0], together["out"][b]), row.pos
        for name in ("part_m", "part_l", "part_o"):
            assert bits_equal(alone[name][0][:, :count], together[name][b][:, :count]), (row.pos, name)
        assert np.isnan(together["part_m"][b][:, count:]).all()  # slots past the row's count keep the poison


@pytest.mark.parametrize("win,ring", [(0, 1200), (300, 700), (500, 500)])
def test_nan_outside_the_visible_keys_never_reaches_outputs(win, ring):
    rng = np.random.default_rng(ring)
    rows = [draw(rng, p, win, 4, 1, 32) for p in ((0, 255, 256, 1000) if win == 0 else (0, 299, 1000, 2999))]
    args = lay(rows, win, ring, n_part=6)
    got = run(window_decode, args)
    assert not np.isnan(from_bits(got["out"], "bf16")).any()
    if ring > win > 0:  # the window_one_early control reads first - 1, which holds NaN here
        assert np.isnan(from_bits(run(controls.window_one_early, args)["out"], "bf16")).any()


def test_refuses_a_workspace_too_small():
    rows = [draw(np.random.default_rng(0), 600, 0, 2, 1, 16)]
    with pytest.raises(ValueError, match="n_part"):
        run(window_decode, lay(rows, 0, 700, n_part=2))


def cancelling(pos, values, batch=1, at=0, hq=2, d=8):
    """q = 0 (every p is 1) and v zero except {position: value}: sums whose grouping decides the result."""
    v = np.zeros((pos + 1, 1, d))
    for p, x in values.items():
        v[p] = x
    zero = rn_bits(np.zeros((pos + 1, 1, d)), "bf16")
    row = Row(pos, 0, rn_bits(np.zeros((hq, d)), "bf16"), zero, rn_bits(v, "bf16"))
    mate = draw(np.random.default_rng(pos), 40, 0, hq, 1, d)
    return lay([mate] * at + [row] + [mate] * (batch - at - 1), 0, pos + 1)


def _scenario(positions, hq=4, hk=1, d=32, win=0, ring=1300, seed=0):
    rng = np.random.default_rng(seed)
    return lay([draw(rng, p, win, hq, hk, d) for p in positions], win, ring)


# 2^20 absorbs 128 keys of 2^-5 in one 256-key chunk; 128-key chunks keep their sum, 4, to the end
ABSORBED = {0: 2.0**20, **{i: 2.0**-5 for i in range(128, 256)}, 256: -(2.0**20)}
# chunk sums 2^20, -2^20, 2^-5: merged in order 2^-5 survives; starting at chunk 1 it is absorbed
CANCELS = {0: 2.0**20, 256: -(2.0**20), 512: 2.0**-5}
CONTROL_CASES = {  # control: (input it is planted for, an input it must leave bit-equal or None)
    "merge_without_rescale": (_scenario([700]), _scenario([0, 100, 255])),
    "bf16_accumulation": (_scenario([300]), None),
    "last_key_dropped": (_scenario([300]), None),
    "first_key_of_chunk_skipped": (_scenario([600]), _scenario([255, 500], win=100, ring=128)),
    "key_head_mismap": (_scenario([40], hq=6, hk=2), _scenario([40], hq=6, hk=1)),
    "chunk_from_batch": (cancelling(256, ABSORBED, batch=5), cancelling(256, ABSORBED, batch=4)),
    "order_dependent_merge": (cancelling(512, CANCELS, batch=2, at=1), cancelling(512, CANCELS, batch=2, at=0)),
    "truncated_output": (_scenario([50]), None),
    "window_one_early": (_scenario([1000], win=300, ring=400), _scenario([250], win=300, ring=400)),
    "empty_chunk_nan": (_scenario([511, 767]), _scenario([510, 768, 1000])),
}


@pytest.mark.parametrize("values", [ABSORBED, CANCELS], ids=["absorbed", "cancels"])
def test_cancelling_rows_independent_of_batch_index(values):
    pos = max(values)
    alone = run(window_decode, cancelling(pos, values))["out"][0]
    for batch, at in ((2, 1), (6, 3), (6, 5)):
        assert bits_equal(alone, run(window_decode, cancelling(pos, values, batch=batch, at=at))["out"][at])


@pytest.mark.parametrize("name", CONTROL_CASES)
def test_control_differs_where_planted(name):
    planted, neutral = CONTROL_CASES[name]
    fn = getattr(controls, name)
    assert fn.__doc__ and "\n" not in fn.__doc__.strip()
    assert not bits_equal(run(fn, planted)["out"], run(window_decode, planted)["out"])
    if neutral is not None:
        assert bits_equal(run(fn, neutral)["out"], run(window_decode, neutral)["out"])


def test_empty_chunk_nan_gives_nan():
    out = run(controls.empty_chunk_nan, _scenario([255, 256]))["out"]
    assert np.isnan(from_bits(out[0], "bf16")).all() and not np.isnan(from_bits(out[1], "bf16")).any()


def test_blocked_gathering_does_not_change_the_bits(monkeypatch):
    """A long row at head dim 512 gives the same bits whether chunks are gathered one or several at a time."""
    from tests.doubles import decode

    rng = np.random.default_rng(1)

    def bits(*shape):  # bf16 by truncation: any bf16 values do here, and fast
        return (rng.standard_normal(shape, np.float32).view(np.uint32) >> 16).astype(np.uint16)

    args = lay([Row(4_999, 0, bits(16, 512), bits(5_000, 1, 512), bits(5_000, 1, 512))], 0, 5_000)
    blocked = run(window_decode, args)
    monkeypatch.setattr(decode, "CHUNKS_PER_BLOCK", 1)
    monkeypatch.setattr(decode, "SCORE_KEYS", 7)
    single = run(window_decode, args)
    for name in OUTPUTS:
        assert bits_equal(blocked[name], single[name]), name
    assert not np.isnan(from_bits(blocked["out"], "bf16")).any()


@pytest.mark.parametrize("shape", [(4, 256, 8), (3, 256, 2, 4, 128), (1, 256, 1), (5, 256, 1, 1), (2, 7, 3)])
def test_lanes_add_in_key_order_as_a_loop_adds(shape):
    """The double's vectorised lane sums have the bits of adding lane after lane from +0, signed zeros and all."""
    from tests.doubles.decode import in_key_order

    rng = np.random.default_rng(7)
    terms = (rng.standard_normal(shape) * np.exp(rng.uniform(-20, 20, shape))).astype(np.float32)
    terms[rng.random(shape) < 0.2] = -0.0
    terms[:, 0] = -0.0
    total = np.zeros(terms[:, 0].shape, np.float32)
    for lane in range(shape[1]):
        total += terms[:, lane]
    assert bits_equal(in_key_order(terms), total)


def _child(call: str, timeout: float) -> subprocess.CompletedProcess:
    code = (f"from tests.doubles import faulty; faulty.{call}(*[None] * 9, win=0, ring=1, n_part=1, scale=1.0, "
            f"kv_heads=1)")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=timeout, capture_output=True,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))


def test_aborts_kills_its_process():
    assert _child("aborts", 30).returncode == -signal.SIGABRT


def test_hangs_never_returns():
    with pytest.raises(subprocess.TimeoutExpired):
        _child("hangs", 1.5)


def test_an_assembled_cache_equals_the_dense_pool_on_rings_and_linear_caches():
    """build_problem's cache is Assembled from the rows' keys; built, it is the pool laid by hand, wraps included."""
    from kcontract.families.attention.layout import build_problem
    from kcontract.families.attention.rows import RowData
    from kcontract.families.attention.spec import Shape
    from kcontract.families.attention.window import Window
    from kcontract.problem import Assembled

    rng = np.random.default_rng(8)
    shape = Shape(head_dim=16, q_heads=4, kv_heads=2)
    for win, ring, positions in ((0, 700, [699, 300, 0]), (256, 300, [1000, 255, 599])):
        rows = [draw(rng, pos, win, 4, 2, 16) for pos in positions]
        data = [RowData(pos=r.pos, first=r.first, q=r.q, k=r.k, v=r.v) for r in rows]
        problem = build_problem("p", data, shape, Window(win, ring), CHUNK, 0.25, "bf16", slots=[2, 0, 1],
                                fill_outside=False)
        hand = lay(rows, win, ring, slots=[2, 0, 1])
        for name in ("k_cache", "v_cache"):
            assembled = problem.inputs[name]
            assert isinstance(assembled, Assembled) and assembled.nbytes == hand[name].nbytes
            assert np.array_equal(assembled.materialise(), hand[name])
        if win:
            assert any(not isinstance(rows_at, slice) for _, rows_at, _ in problem.inputs["k_cache"].blocks)
