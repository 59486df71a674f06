#!/usr/bin/env python3
"""A first look at kernels/window_prompt_fused.cu on an H200 before the contract runs it: does each descriptor
variant give the float64 softmax's outputs to bf16 accuracy, and how fast is the kernel at the prompt bench's
shapes?

    python3 tools/mma/fused_smoke.py --build       # here: NVRTC cubins for sm_90a into .cubins/fused/
    python3 tools/mma/fused_smoke.py OUTDIR        # on the H200, from the repo root (carry .cubins)
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SOURCE = ROOT / "kernels" / "window_prompt_fused.cu"
BUILD = ROOT / ".cubins" / "fused"
K_FORMS = [(16, 1024), (1024, 16), (0, 1024)]  # K-major Q and K: (leading, stride) bytes
V_FORMS = [(1024, 1024), (16, 1024), (1024, 16), (2048, 1024), (1024, 2048), (8192, 1024), (1024, 8192)]
SHAPES = [(128, 2, 0), (128, 2, 1), (256, 2, 1), (256, 2, 0)]  # (D, G, PB) instances of the default build


def symbol(d: int, g: int, pb: int) -> str:
    return f"window_prompt_attend<{d}, {g}, {pb}>"


def build() -> None:
    """The default build (every SHAPES instance) and one d128 bf16-P build per descriptor variant."""
    from kcontract.toolchain.nvrtc import Compiled, compile_cubin
    from kcontract.toolchain.tools import cuda_include_dir

    BUILD.mkdir(parents=True, exist_ok=True)
    src = SOURCE.read_bytes()
    dirs = (str(ROOT / "kernels"), str(cuda_include_dir()))
    plan = {"default": ([], [symbol(*s) for s in SHAPES]), "s3": (["-DWF_STAGES=3"], [symbol(*s) for s in SHAPES])}
    for kl, ks in K_FORMS:
        for vl, vs in V_FORMS:
            if (kl, ks) != K_FORMS[0] and (vl, vs) != V_FORMS[0]:
                continue  # K's candidates with V's first, V's with K's first
            defs = [f"-DWF_K_LBO={kl}", f"-DWF_K_SBO={ks}", f"-DWF_V_LBO={vl}", f"-DWF_V_SBO={vs}"]
            plan[f"k{kl}_{ks}_v{vl}_{vs}"] = (defs, [symbol(128, 2, 1)])
    names = {}
    for tag, (defs, exprs) in plan.items():
        done = compile_cubin(src, SOURCE.name, tuple(exprs), "sm_90a", ("-std=c++17", *defs), dirs)
        if not isinstance(done, Compiled):
            raise SystemExit(f"{tag}: does not compile:\n{done.log}")
        (BUILD / f"{tag}.cubin").write_bytes(done.cubin)
        names[tag] = done.lowered
        print(f"built {tag}")
    (BUILD / "names.json").write_text(json.dumps(names, indent=1))


def bf16_bits(x: np.ndarray) -> np.ndarray:
    f = np.asarray(x, np.float32).view(np.uint32)
    return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)


def problem(rng, d: int, hk: int, g: int, rows: int, start: int, win: int = 0):
    """One causal sequence of `rows` rows from `start` over a linear cache (or a ring of 2 win rows)."""
    end = start + rows - 1
    ring = end + 1 if win == 0 else 2 * win + rows
    keys = np.arange(max(0, end - ring + 1), end + 1)
    k = np.zeros((1, ring, hk, d), np.uint16)
    v = np.zeros((1, ring, hk, d), np.uint16)
    k[0, keys % ring] = bf16_bits(rng.standard_normal((len(keys), hk, d)) * 1.5)
    v[0, keys % ring] = bf16_bits(rng.standard_normal((len(keys), hk, d)))
    q = bf16_bits(rng.standard_normal((rows, hk * g, d)))
    return {"q": q, "k": k, "v": v, "rows": rows, "start": start, "win": win, "ring": ring,
            "row_last": np.arange(start, end + 1, dtype=np.int32)}


def launch(cp, func, pr, d: int, g: int, scale: float, stages: int = 2):
    rows, hq = pr["q"].shape[:2]
    hk = hq // g
    out = cp.full((rows, hq, d), 0x7FC0, cp.uint16)  # poisoned: NaN
    row_m = cp.full((rows, hq), np.nan, cp.float32)
    args = (cp.asarray(pr["q"]), cp.asarray(pr["k"]), cp.asarray(pr["v"]), cp.asarray(np.array([0, rows], np.int32)),
            cp.asarray(np.array([pr["start"]], np.int32)), cp.asarray(np.array([0], np.int32)),
            cp.asarray(pr["row_last"]), out, row_m, np.int32(pr["win"]), np.int32(pr["ring"]), np.float32(scale),
            np.int32(hk), np.int32(1))
    smem = (1 + 2 * stages) * 128 * d
    func.max_dynamic_shared_size_bytes = smem
    grid = (-(-rows // 64), hq, 1)
    return (lambda: func(grid, (d,), args, shared_mem=smem)), out, row_m


def reference(cp, pr, d: int, g: int, scale: float):
    """float64 softmax(q k^T scale) v per row over its visible keys, and each row's largest score."""
    f = lambda b: (cp.asarray(b).astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
    q, k, v = f(pr["q"]), f(pr["k"][0]), f(pr["v"][0])
    rows, hq = q.shape[:2]
    out = np.empty((rows, hq, d))
    big = np.empty((rows, hq))
    for r in range(rows):
        pos = pr["start"] + r
        first = max(0, pos - pr["win"] + 1) if pr["win"] else 0
        idx = cp.arange(first, pos + 1) % pr["ring"]
        kk, vv = k[idx], v[idx]  # [n, hk, d]
        s = cp.einsum("hgd,nhd->hgn", q[r].reshape(-1, g, d), kk) * scale  # [hk, g, n]
        big[r] = s.max(axis=-1).reshape(-1).get()
        w = cp.exp(s - s.max(axis=-1, keepdims=True))
        o = cp.einsum("hgn,nhd->hgd", w, vv) / w.sum(axis=-1)[..., None]
        out[r] = o.reshape(hq, d).get()
    return out, big


def accuracy(cp, out, row_m, want, big) -> dict:
    got = (cp.asarray(out).astype(cp.uint32) << 16).view(cp.float32).get().astype(np.float64)
    err = np.abs(got - want) / (np.abs(want) + 2.0**-6)
    rm = row_m.get().astype(np.float64)
    return {"max_rel": float(np.nanmax(err)) if np.isfinite(err).any() else None, "nan": int(np.isnan(got).sum()),
            "bf16_close": float(np.mean(err <= 2.0**-7)), "row_m_max_diff": float(np.nanmax(np.abs(rm - big)))}


def timed(cp, run, repeat: int = 5) -> float:
    run()
    cp.cuda.runtime.deviceSynchronize()
    best = float("inf")
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return best


def main_gpu(out_dir: Path, tags: list[str], ncu: bool = False) -> int:
    import cupy as cp

    out_dir.mkdir(parents=True, exist_ok=True)
    names = json.loads((BUILD / "names.json").read_text())
    rng = np.random.default_rng(7)
    report = {"variants": {}, "shapes": {}, "speed": []}
    small = problem(rng, 128, 2, 2, 100, 130)
    want = reference(cp, small, 128, 2, 128**-0.5)
    for tag in names:
        if tag == "default" or tag not in tags:
            continue
        module = cp.RawModule(path=str(BUILD / f"{tag}.cubin"))
        func = module.get_function(names[tag][symbol(128, 2, 1)])
        try:
            run, out, row_m = launch(cp, func, small, 128, 2, 128**-0.5)
            run()
            cp.cuda.runtime.deviceSynchronize()
            report["variants"][tag] = accuracy(cp, out, row_m, *want)
        except Exception as error:  # a trap poisons the context: stop here
            report["variants"][tag] = {"error": str(error)[:200]}
            break
        print(tag, report["variants"][tag], flush=True)
    module = cp.RawModule(path=str(BUILD / "default.cubin"))
    if ncu:  # one launch for the profiler: d256 16/8 bf16 P, 512 rows at 32k keys
        func = module.get_function(names["default"][symbol(256, 2, 1)])
        run, _, _ = launch(cp, func, problem(rng, 256, 8, 2, 512, 32768 - 512), 256, 2, 256**-0.5)
        run()
        cp.cuda.runtime.deviceSynchronize()
        return 0
    for d, g, pb in SHAPES:
        func = module.get_function(names["default"][symbol(d, g, pb)])
        for label, pr in (("causal 200 at 900", problem(rng, d, 2, g, 200, 900)),
                          ("window 256, 150 at 2000", problem(rng, d, 2, g, 150, 2000, win=256))):
            run, out, row_m = launch(cp, func, pr, d, g, d**-0.5)
            run()
            cp.cuda.runtime.deviceSynchronize()
            got = accuracy(cp, out, row_m, *reference(cp, pr, d, g, d**-0.5))
            report["shapes"][f"d{d} g{g} pb{pb} {label}"] = got
            print(f"d{d} g{g} pb{pb} {label}: {got}", flush=True)
    modules = {tag: cp.RawModule(path=str(BUILD / f"{tag}.cubin")) for tag in ("default", "s3")}
    for (d, g, pb, hk), (tag, stages), keys in itertools.product(
            ((256, 2, 1, 8), (256, 2, 0, 8), (128, 2, 0, 16), (128, 2, 1, 16)), (("default", 2), ("s3", 3)),
            (1024, 8192, 32768)):
        func = modules[tag].get_function(names[tag][symbol(d, g, pb)])
        if True:
            rows = 512
            pr = problem(rng, d, hk, g, rows, keys - rows)
            run, _, _ = launch(cp, func, pr, d, g, d**-0.5, stages)
            seconds = timed(cp, run)
            visible = sum(keys - rows + 1 + r for r in range(rows))
            tflops = 4.0 * d * visible * hk * g / seconds / 1e12
            report["speed"].append({"d": d, "g": g, "pb": pb, "hq": hk * g, "keys": keys, "ms": seconds * 1e3,
                                    "tflops": tflops, "stages": stages})
            print(f"speed {tag} d{d} {hk * g}/{hk} {'bf16 P' if pb else 'P32'} {keys} keys: {seconds * 1e3:.3f} ms, "
                  f"{tflops:.1f} TFLOP/s", flush=True)
    (out_dir / "fused_smoke.json").write_text(json.dumps(report, indent=1))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--ncu", action="store_true", help="one launch to profile")
    ap.add_argument("--variants", nargs="*", default=[], help="descriptor variants to try first (a bad one may "
                    "end the run with an illegal address)")
    args = ap.parse_args(argv)
    if args.build:
        build()
        return 0
    if args.out is None:
        ap.error("give OUTDIR (on the GPU) or --build (here)")
    began = time.time()
    code = main_gpu(args.out, args.variants, args.ncu)
    print(f"fused smoke done in {time.time() - began:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
