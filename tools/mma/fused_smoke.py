#!/usr/bin/env python3
"""kernels/window_prompt_fused.cu on an H200 before the contract runs it: a rebuilt kernel that keeps the declared
order must give a reference build's bits (out and row_m) on every call, and the float64 softmax's outputs to bf16
accuracy where no reference build has the shape. Where the two builds declare different merge chains (CHAINS), only
row_m must be bit-equal (a maximum has no order) and out within one bf16 ulp of the reference's; and every call's
rows must keep their bits when the call starts at a later row (other tiles). Then both are timed at the prompt
bench's shapes.

    python3 tools/mma/fused_smoke.py --build [--ref REV [--ref-smem EXPR] [--ref-head-grid]]   # here: cubins
    python3 tools/mma/fused_smoke.py OUTDIR   # on the H200, from the repo root (carry .cubins)

--build compiles NVRTC cubins for sm_90a into .cubins/fused/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SOURCE = "kernels/window_prompt_fused.cu"
BUILD = ROOT / ".cubins" / "fused"
SHAPES = [(128, 2, 0), (128, 2, 1), (128, 4, 0), (256, 2, 1), (256, 2, 0), (256, 5, 1), (256, 16, 0), (512, 16, 0),
          (512, 8, 1), (512, 8, 0), (512, 5, 0)]  # (D, G, PB)
SPEED = [(256, 8, 2, 1), (256, 8, 2, 0), (128, 8, 4, 0), (128, 4, 2, 1), (512, 1, 16, 0), (512, 4, 8, 1),
         (512, 4, 8, 0)]  # (D, Hk, G, PB) at 512 rows ending at each of KEYS
KEYS = (1024, 8192, 32768, 131072)


def symbol(d: int, g: int, pb: int) -> str:
    return f"window_prompt_attend<{d}, {g}, {pb}>"


VARIANT_SMEM = {}  # tag -> a Python expression of d and pb: the variant's shared memory (names.json carries it)
HEAD_GRID = set()  # tags whose grid is (tiles of 64 rows, query heads), not the tree's (tiles of 64 / G, key heads)


TREE_SMEM = "(5 * 128 * d + 3072) if d == 256 else (1 + 2 * (1 if d == 512 else 2)) * 128 * d + (1 if pb else 3) * 8192 + 3072"
CHAINS = {256: 2}  # head dim -> the tree's merge chains (wf::kChains; 1 elsewhere)


def layout(tag: str, d: int, pb: int) -> tuple[int, int]:
    """(threads, dynamic shared memory bytes) of a build: its own expression (a variant's, or the reference's when
    given), else the tree's kernel's (wf::kSmemBytes)."""
    return 256, int(eval(VARIANT_SMEM.get(tag, TREE_SMEM), {"d": d, "pb": pb}))


def build(ref: str | None, variants: list[str], ref_smem: str | None = None, ref_head_grid: bool = False) -> None:
    """The tree's kernel at every SHAPES instance, REV's (if given; its shared memory REF_SMEM where its layout
    differs from the tree's, its grid one block per 64 rows and query head with REF_HEAD_GRID) at every one too,
    and each
    variant TAG=FILE:KERNEL:SMEM (a kernel template of the fused ABI at head dims 128 and 256, 256 threads, SMEM
    its shared memory as a Python expression of d and pb)."""
    from kcontract.toolchain.locate import find_toolchain
    from kcontract.toolchain.nvrtc import Compiled, compile_cubin

    BUILD.mkdir(parents=True, exist_ok=True)
    tool = find_toolchain()
    dirs = (str(ROOT / "kernels"), str(tool.headers.path))
    plan = {"new": ((ROOT / SOURCE).read_bytes(), [symbol(*s) for s in SHAPES])}
    if ref:
        old = subprocess.run(["git", "show", f"{ref}:{SOURCE}"], cwd=ROOT, capture_output=True, check=True).stdout
        plan["ref"] = (old, [symbol(*s) for s in SHAPES])
    smem = {"ref": ref_smem} if ref and ref_smem else {}
    for item in variants:
        tag, _, rest = item.partition("=")
        path, kernel, smem[tag] = rest.split(":", 2)
        plan[tag] = (Path(path).read_bytes(), [f"{kernel}<{d}, {g}, {pb}>" for d, g, pb in SHAPES if d != 512])
    names = {"variant_smem": smem, "head_grid": ["ref"] if ref and ref_head_grid else []}
    for tag, (src, exprs) in plan.items():
        done = compile_cubin(str(tool.nvrtc.path), src, f"{tag}.cu", tuple(exprs), "sm_90a", ("-std=c++17",), dirs)
        if not isinstance(done, Compiled):
            raise SystemExit(f"{tag}: does not compile:\n{done.log}")
        (BUILD / f"{tag}.cubin").write_bytes(done.cubin)
        names[tag] = done.lowered
        print(f"built {tag}: {len(exprs)} instances")
    (BUILD / "names.json").write_text(json.dumps(names, indent=1))


def bf16(cp, x):
    """RN of fp32 to bf16 bit patterns."""
    f = x.astype(cp.float32).view(cp.uint32)
    return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(cp.uint16)


def problem(cp, rng, d, hk, g, rows, start, win=0, ring=None, image=None, slots=1):
    """`slots` sequences of `rows` rows from `start` (the i-th from start + 100 i, in slot i), drawn on the GPU;
    `image` = (first, last) positions whose rows see up to the span's end."""
    starts = [start + 100 * i for i in range(slots)]
    end = starts[-1] + rows - 1
    ring = ring or (end + 1 if win == 0 else 2 * win + rows + 100 * slots)
    k, v = cp.zeros((slots, ring, hk, d), cp.uint16), cp.zeros((slots, ring, hk, d), cp.uint16)
    lasts = []
    for i, s0 in enumerate(starts):
        keys = cp.arange(max(0, s0 + rows - ring), s0 + rows)
        k[i, keys % ring] = bf16(cp, rng.standard_normal((len(keys), hk, d), dtype=cp.float32) * 1.5)
        v[i, keys % ring] = bf16(cp, rng.standard_normal((len(keys), hk, d), dtype=cp.float32) + 0.5)
        last = np.arange(s0, s0 + rows, dtype=np.int32)
        if image:
            a, b = image
            last[(last >= a) & (last <= b)] = b
        lasts.append(last)
    q = bf16(cp, rng.standard_normal((rows * slots, hk * g, d), dtype=cp.float32))
    return {"q": q, "k": k, "v": v, "win": win, "ring": ring, "row_last": np.concatenate(lasts),
            "seq_row0": np.arange(slots + 1, dtype=np.int32) * rows, "seq_pos0": np.array(starts, np.int32),
            "seq_slot": np.arange(slots, dtype=np.int32)}


def launch(cp, func, pr, d, g, pb, tag, scale):
    rows, hq = pr["q"].shape[:2]
    per_seq = rows // len(pr["seq_pos0"])
    tile = 64 if tag in HEAD_GRID else 64 // g
    grid = (len(pr["seq_pos0"]) * -(-per_seq // tile), hq if tag in HEAD_GRID else hq // g, 1)
    out = cp.full((rows, hq, d), 0x7FC0, cp.uint16)  # poisoned: NaN
    row_m = cp.full((rows, hq), np.nan, cp.float32)
    n_seq = len(pr["seq_pos0"])
    args = (pr["q"], pr["k"], pr["v"], cp.asarray(pr["seq_row0"]), cp.asarray(pr["seq_pos0"]),
            cp.asarray(pr["seq_slot"]), cp.asarray(pr["row_last"]), out, row_m, np.int32(pr["win"]),
            np.int32(pr["ring"]), np.float32(scale), np.int32(hq // g), np.int32(n_seq))
    threads, smem = layout(tag, d, pb)
    func.max_dynamic_shared_size_bytes = smem
    return (lambda: func(grid, (threads,), args, shared_mem=smem)), out, row_m


def reference(cp, pr, d, g, scale):
    """float64 softmax(q k^T scale) v per row over its visible keys."""
    f = lambda b: (cp.asarray(b).astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
    q = f(pr["q"])
    out = np.empty(q.shape)
    for s, (r0, r1) in enumerate(zip(pr["seq_row0"][:-1], pr["seq_row0"][1:])):
        k, v = f(pr["k"][s]), f(pr["v"][s])
        for r in range(r0, r1):
            pos = int(pr["seq_pos0"][s]) + r - r0
            first = max(0, pos - pr["win"] + 1) if pr["win"] else 0
            idx = cp.arange(first, int(pr["row_last"][r]) + 1) % pr["ring"]
            sc = cp.einsum("hgd,nhd->hgn", q[r].reshape(-1, g, d), k[idx]) * scale
            w = cp.exp(sc - sc.max(axis=-1, keepdims=True))
            out[r] = (cp.einsum("hgn,nhd->hgd", w, v[idx]) / w.sum(axis=-1)[..., None]).reshape(-1, d).get()
    return out


def compare(cp, got, want) -> dict:
    """Bits of (out, row_m) against another build's: how many differ, and NaNs left."""
    (o1, m1), (o2, m2) = got, want
    return {"out_diff": int((o1 != o2).sum()), "row_m_diff": int((m1.view(cp.uint32) != m2.view(cp.uint32)).sum()),
            "nan": int(cp.isnan(m1).sum()) + int((o1 == 0x7FC0).sum()), "outputs": int(o1.size)}


def near(cp, got, want) -> dict:
    """out of a build in other merge chains against the reference's: row_m bit for bit, out within a bf16 ulp."""
    (o1, m1), (o2, m2) = got, want
    ulps = cp.abs(o1.astype(cp.int32) - o2.astype(cp.int32))  # same sign: adjacent bf16 patterns differ by 1
    ulps = cp.where((o1 ^ o2) & 0x8000, 1 << 16, ulps)
    return {"out_same": float((ulps == 0).mean()), "out_max_ulps": int(ulps.max()),
            "row_m_diff": int((m1.view(cp.uint32) != m2.view(cp.uint32)).sum()),
            "nan": int(cp.isnan(m1).sum()) + int((o1 == 0x7FC0).sum()), "outputs": int(o1.size)}


def later_start(pr, cut: int) -> dict:
    """The one-sequence call pr from its row `cut` on: the same rows in other tiles."""
    out = dict(pr)
    out.update(q=pr["q"][cut:], row_last=pr["row_last"][cut:],
               seq_row0=np.array([0, len(pr["row_last"]) - cut], np.int32),
               seq_pos0=pr["seq_pos0"] + np.int32(cut))
    return out


def accuracy(cp, out, want) -> dict:
    got = (cp.asarray(out).astype(cp.uint32) << 16).view(cp.float32).get().astype(np.float64)
    err = np.abs(got - want) / (np.abs(want) + 2.0**-6)
    return {"max_rel": float(np.nanmax(err)), "nan": int(np.isnan(got).sum()), "bf16_close": float(np.mean(err <= 2.0**-7))}


def timed(cp, run, repeat: int = 7) -> float:
    run()
    cp.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return float(np.median(times))


def main_gpu(out_dir: Path, speed_only: tuple | None = None, tags: list[str] | None = None) -> int:
    """Bits and accuracy of every SHAPES call, then SPEED; speed_only (D, Hk, G, PB, keys): that one timing alone
    (for a profiler); tags: those builds only."""
    import cupy as cp

    out_dir.mkdir(parents=True, exist_ok=True)
    names = json.loads((BUILD / "names.json").read_text())
    VARIANT_SMEM.update(names.pop("variant_smem", {}))
    HEAD_GRID.update(names.pop("head_grid", []))
    if tags:
        names = {tag: lowered for tag, lowered in names.items() if tag in tags}
    kernel_of = {tag: next(iter(lowered)).split("<")[0] for tag, lowered in names.items()}
    modules = {tag: cp.RawModule(path=str(BUILD / f"{tag}.cubin")) for tag in names}
    has = lambda tag, d, g, pb: f"{kernel_of[tag]}<{d}, {g}, {pb}>" in names[tag]
    get = lambda tag, d, g, pb: modules[tag].get_function(names[tag][f"{kernel_of[tag]}<{d}, {g}, {pb}>"])
    rng = cp.random.RandomState(7)
    report = {"bits": {}, "accuracy": {}, "speed": []}
    bad = 0
    for d, g, pb in SHAPES if speed_only is None else ():
        hk = 2
        cases = {"causal 200 at 900": problem(cp, rng, d, hk, g, 200, 900),
                 "causal 64 at 0": problem(cp, rng, d, hk, g, 64, 0),
                 "causal 131 at 4093": problem(cp, rng, d, hk, g, 131, 4093)}
        cases["two sequences of 100 at 700 and 800"] = problem(cp, rng, d, hk, g, 100, 700, slots=2)
        if d != 512:
            cases["window 256 ring 450 (chunks wrap), 150 at 2000"] = problem(cp, rng, d, hk, g, 150, 2000, win=256,
                                                                         ring=450)
            cases["window 1024, image span, 300 at 5000"] = problem(cp, rng, d, hk, g, 300, 5000, win=1024,
                                                                    image=(5040, 5199))
        for label, pr in cases.items():
            key = f"d{d} g{g} pb{pb} {label}"
            runs = {}
            for tag in names:
                if not has(tag, d, g, pb):
                    continue
                run, out, row_m = launch(cp, get(tag, d, g, pb), pr, d, g, pb, tag, d**-0.5)
                run()
                cp.cuda.runtime.deviceSynchronize()
                runs[tag] = (out, row_m)
            if "ref" in runs and CHAINS.get(d, 1) == 1:
                got = {tag: compare(cp, runs[tag], runs["ref"]) for tag in runs if tag != "ref"}
                report["bits"][key] = got
                bad += sum(x["out_diff"] + x["row_m_diff"] + x["nan"] for x in got.values())
            else:
                got = accuracy(cp, runs["new"][0], reference(cp, pr, d, g, d**-0.5))
                report["accuracy"][key] = got
                bad += got["nan"] + (got["bf16_close"] < (0.98 if pb else 0.99))  # bf16 P: p's own rounding
                if "ref" in runs:
                    got["against_ref"] = near(cp, runs["new"], runs["ref"])
                    bad += got["against_ref"]["row_m_diff"] + (got["against_ref"]["out_max_ulps"] > 1)
            if len(pr["seq_pos0"]) == 1:  # the same rows from a later start: other tiles, the same bits
                cut = 37
                run, out, row_m = launch(cp, get("new", d, g, pb), later_start(pr, cut), d, g, pb, "new", d**-0.5)
                run()
                cp.cuda.runtime.deviceSynchronize()
                whole = runs["new"]
                got["later_start"] = compare(cp, (out, row_m), (whole[0][cut:], whole[1][cut:]))
                bad += sum(got["later_start"][x] for x in ("out_diff", "row_m_diff", "nan"))
            print(f"{key}: {got}", flush=True)
    timings = ((s, k) for s in SPEED for k in KEYS) if speed_only is None else [(speed_only[:4], speed_only[4])]
    for (d, hk, g, pb), keys in timings:
        pr = problem(cp, rng, d, hk, g, 512, keys - 512)
        visible = sum(keys - 512 + 1 + r for r in range(512))
        line = {"d": d, "hq": hk * g, "hk": hk, "pb": pb, "keys": keys}
        for tag in names:
            if has(tag, d, g, pb):
                seconds = timed(cp, launch(cp, get(tag, d, g, pb), pr, d, g, pb, tag, d**-0.5)[0])
                line[tag] = round(4.0 * d * visible * hk * g / seconds / 1e12, 1)
        report["speed"].append(line)
        print(f"speed d{d} {hk * g}/{hk} {'bf16 P' if pb else 'P32'} {keys} keys: "
              + ", ".join(f"{t} {line[t]} TFLOP/s" for t in names if t in line), flush=True)
        del pr
        cp.get_default_memory_pool().free_all_blocks()
    (out_dir / "fused_smoke.json").write_text(json.dumps(report, indent=1))
    print(f"FUSED SMOKE {'OK' if bad == 0 else 'FAILED'}: {len(report['bits'])} calls against the reference build's "
          f"bits, {len(report['accuracy'])} against float64")
    return 0 if bad == 0 else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--ref", help="with --build: a revision whose kernel the tree's must match bit for bit")
    ap.add_argument("--ref-smem", help="with --ref: its shared memory as a Python expression of d and pb, where its "
                    "layout is not the tree's")
    ap.add_argument("--ref-head-grid", action="store_true", help="with --ref: its grid is one block per 64 rows "
                    "and query head")
    ap.add_argument("--variant", action="append", default=[], help="with --build: TAG=FILE:KERNEL:SMEM, a kernel "
                    "that must match the reference build bit for bit, timed beside it")
    ap.add_argument("--speed", help="on the GPU: only this timing, D,HK,G,PB,KEYS (for ncu)")
    ap.add_argument("--tags", help="on the GPU: only these builds, comma-separated (new, ref, variants)")
    args = ap.parse_args(argv)
    if args.build:
        build(args.ref, args.variant, args.ref_smem, args.ref_head_grid)
        return 0
    if args.out is None:
        ap.error("give OUTDIR (on the GPU) or --build (here)")
    began = time.time()
    speed = tuple(int(x) for x in args.speed.split(",")) if args.speed else None
    code = main_gpu(args.out, speed, args.tags.split(",") if args.tags else None)
    print(f"fused smoke done in {time.time() - began:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
