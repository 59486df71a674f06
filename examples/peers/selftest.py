"""Self-test of the peers on a GPU: `python -m examples.peers.selftest` (from the repository root).

Builds small random decode batches (B = 3 rows of different lengths: a linear cache at head dim 128, a ring
behind a window, a linear cache at head dim 256 with 8 query heads per key head), runs every peer on a
non-default CuPy stream, and compares each output with a float64 numpy reference computed from the same bf16
bits (max |error| / max |reference| within 2e-2). Cache rows a row must not read hold NaN bits, so a peer that
reads outside [first, pos] shows NaN. Each row is also run alone, and the line says how many rows' bits differ
from the batched call's (gate 2's question, asked once). One line per peer; it never stops at a failure and
exits 0 whatever the peers do.

    python -m examples.peers.selftest               every peer
    python -m examples.peers.selftest flex triton   peers whose names contain `flex` or `triton`
    python -m examples.peers.selftest -v            with each failure's traceback
"""

from __future__ import annotations

import sys
import time
import traceback

import numpy as np

from . import sdpa, triton_decode

TOLERANCE = 2e-2
NAN_BITS = 0x7FC0
CASES = (  # name, head_dim, q_heads, kv_heads, win (0: linear), ring, row positions
    ("linear_d128", 128, 8, 2, 0, 2100, (2099, 700, 37)),
    ("ring_d128", 128, 8, 2, 256, 320, (1000, 255, 600)),
    ("linear_d256", 256, 16, 2, 0, 1500, (1499, 1024, 5)),
)
PEERS = (
    ("sdpa.math", sdpa.math),
    ("sdpa.efficient", sdpa.efficient),
    ("sdpa.cudnn", sdpa.cudnn),
    ("sdpa.flash", sdpa.flash),
    ("sdpa.flex", sdpa.flex),
    ("triton_decode.split_fixed", triton_decode.split_fixed),
    ("triton_decode.split_by_batch", triton_decode.split_by_batch),
)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """bf16 bits of float32 values, rounded to nearest even (finite inputs)."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def f32_of_bits(bits: np.ndarray) -> np.ndarray:
    """float32 values of bf16 bits."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def visible(pos: int, win: int) -> tuple[int, int]:
    """First and last visible key of a row."""
    return (max(0, pos - win + 1) if win > 0 else 0), pos


def build(case, seed: int = 0) -> dict:
    """The ABI's inputs and scalars of one case; row b reads slot b; unread cache rows hold NaN."""
    _, dim, hq, hk, win, ring, positions = case
    rng = np.random.default_rng(seed)
    rows = len(positions)
    q = bf16_bits(rng.standard_normal((rows, hq, dim)))
    k_cache = np.full((rows, ring, hk, dim), NAN_BITS, np.uint16)
    v_cache = np.full((rows, ring, hk, dim), NAN_BITS, np.uint16)
    for b, pos in enumerate(positions):
        first, last = visible(pos, win)
        at = np.arange(first, last + 1) % ring
        k_cache[b, at] = bf16_bits(rng.standard_normal((len(at), hk, dim)))
        v_cache[b, at] = bf16_bits(rng.standard_normal((len(at), hk, dim)))
    return {"q": q, "k_cache": k_cache, "v_cache": v_cache, "row_pos": np.array(positions, np.int32),
            "row_slot": np.arange(rows, dtype=np.int32), "win": np.int32(win), "ring": np.int32(ring),
            "scale": np.float32(1.0 / np.sqrt(dim)), "kv_heads": np.int32(hk)}


def reference(inputs: dict) -> np.ndarray:
    """float64 attention [B, Hq, D] from the inputs' bits."""
    q = f32_of_bits(inputs["q"]).astype(np.float64)
    rows, hq, dim = q.shape
    hk = int(inputs["kv_heads"])
    out = np.empty((rows, hq, dim))
    for b in range(rows):
        first, last = visible(int(inputs["row_pos"][b]), int(inputs["win"]))
        at = np.arange(first, last + 1) % int(inputs["ring"])
        slot = int(inputs["row_slot"][b])
        k = f32_of_bits(inputs["k_cache"][slot, at]).astype(np.float64)  # [n, Hk, D]
        v = f32_of_bits(inputs["v_cache"][slot, at]).astype(np.float64)
        for h in range(hq):
            kh = h // (hq // hk)
            s = k[:, kh] @ q[b, h] * float(inputs["scale"])
            p = np.exp(s - s.max())
            out[b, h] = p @ v[:, kh] / p.sum()
    return out


def rows_of(inputs: dict, rows: list[int]) -> dict:
    """The same call over a subset of the rows (caches unchanged)."""
    chosen = dict(inputs)
    for name in ("q", "row_pos", "row_slot"):
        chosen[name] = np.ascontiguousarray(inputs[name][rows])
    return chosen


def error_of(out_bits: np.ndarray, ref: np.ndarray) -> float:
    """max |out - ref| / max |ref|; inf where the output holds NaN or inf."""
    got = f32_of_bits(out_bits).astype(np.float64)
    if not np.isfinite(got).all():
        return float("inf")
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def run_on_gpu(peer, inputs: dict) -> np.ndarray:
    """The peer's output bits, called with CuPy arrays on a non-default stream as kcontract does."""
    import cupy

    rows, hq, dim = inputs["q"].shape
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        arrays = {name: cupy.asarray(inputs[name]) for name in ("q", "k_cache", "v_cache", "row_pos", "row_slot")}
        out = cupy.full((rows, hq, dim), NAN_BITS, dtype=cupy.uint16)
        part_m = cupy.full((rows, hq, 1), np.nan, dtype=cupy.float32)
        part_l = cupy.full((rows, hq, 1), np.nan, dtype=cupy.float32)
        part_o = cupy.full((rows, hq, 1, dim), np.nan, dtype=cupy.float32)
        peer(**arrays, part_m=part_m, part_l=part_l, part_o=part_o, out=out, win=inputs["win"],
             ring=inputs["ring"], n_part=np.int32(1), scale=inputs["scale"], kv_heads=inputs["kv_heads"])
        result = cupy.asnumpy(out)
    stream.synchronize()
    return result


def check_peer(peer, cases, run=run_on_gpu) -> str:
    """`ok max_err=... rows_differing_alone=k/n` or `FAILED <one line>` over every case."""
    worst, differ, total = 0.0, 0, 0
    for case in cases:
        inputs = build(case)
        out = run(peer, inputs)
        err = error_of(out, reference(inputs))
        if not err <= TOLERANCE:
            return f"FAILED {case[0]}: max_err={err:.3g} above {TOLERANCE}"
        worst = max(worst, err)
        for b in range(len(case[6])):
            alone = run(peer, rows_of(inputs, [b]))
            differ += int(not np.array_equal(alone[0], out[b]))
            total += 1
    return f"ok max_err={worst:.3g} rows_differing_alone={differ}/{total}"


def main() -> int:
    wanted = [arg for arg in sys.argv[1:] if not arg.startswith("-")]  # peers whose names contain any of these
    for name, peer in PEERS:
        if wanted and not any(part in name for part in wanted):
            continue
        start = time.perf_counter()
        try:
            line = check_peer(peer, CASES)
        except Exception as error:  # noqa: BLE001 - one line per peer, whatever broke
            text = str(error).strip().splitlines()
            line = f"FAILED {type(error).__name__}: {text[0][:400] if text else ''}"
            if "-v" in sys.argv:
                traceback.print_exc()
        path = sdpa.PATHS.get(name.split(".")[-1]) if name.startswith("sdpa.") else None
        took = f" ({time.perf_counter() - start:.1f} s)"
        print(f"peer {name}: {line}" + (f" [{path}]" if path else "") + took, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
