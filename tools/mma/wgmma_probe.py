#!/usr/bin/env python3
"""Does wgmma (sm_90a) accumulate like mma.sync? The same k-step chains through both, bit for bit, and each
wgmma step against the k-step model the contract's ranges replay (kcontract.families.attention.tensorcore);
then wgmma's bf16 throughput ceiling.

    python3 tools/mma/wgmma_probe.py --build             # here: NVRTC cubin for sm_90a into .cubins/
    python3 tools/mma/wgmma_probe.py OUTDIR              # on the H200, from the repo root (carry .cubins)

Steps on the GPU: (1) layout: small-integer chains, whose sums are exact, must equal C + A B^T in both kernels
(prints LAYOUT OK or exits 2); (2) random chains (wide exponents, cancellation, c far above and below the
products): wgmma against mma.sync word for word, and every wgmma step against the model fed the device's own
previous accumulator; (3) m64n256k16 back to back on every SM. OUTDIR/wgmma_probe.json holds the counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kcontract.families.attention.tensorcore import kstep  # noqa: E402

SOURCE = Path(__file__).with_name("wgmma_probe.cu")
CUBIN = ROOT / ".cubins" / "wgmma_probe.cubin"
M, N, K = 64, 8, 16


def build() -> Path:
    """NVRTC cubin of the probe for sm_90a (wgmma needs the arch-specific target)."""
    from kcontract.toolchain.locate import find_toolchain
    from kcontract.toolchain.nvrtc import Compiled, compile_cubin

    tool = find_toolchain()
    done = compile_cubin(str(tool.nvrtc.path), SOURCE.read_bytes(), SOURCE.name, (), "sm_90a", ("-std=c++17",),
                         (str(ROOT / "kernels"), str(tool.headers.path)))
    if not isinstance(done, Compiled):
        raise SystemExit(f"wgmma_probe.cu does not compile for sm_90a:\n{done.log}")
    CUBIN.parent.mkdir(parents=True, exist_ok=True)
    CUBIN.write_bytes(done.cubin)
    return CUBIN


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of float values (RN; the generators give exact bf16 values)."""
    f = np.asarray(x, np.float32).view(np.uint32)
    return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """float64 values of bf16 bit patterns."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _bf16(rng: np.random.Generator, shape, lo: int, hi: int) -> np.ndarray:
    """Random bf16 values: random sign, exponent in [lo, hi], 7 random mantissa bits."""
    mant = 1 + rng.integers(0, 128, shape) / 128.0
    return rng.choice([-1.0, 1.0], shape) * np.ldexp(mant, rng.integers(lo, hi + 1, shape))


def integer_chains(rng: np.random.Generator, problems: int, steps: int, n: int = N):
    """Inputs whose every sum is exact in fp32: small integers."""
    a = rng.integers(-4, 5, (problems, steps, M, K)).astype(np.float64)
    b = rng.integers(-4, 5, (problems, steps, n, K)).astype(np.float64)
    c = rng.integers(-64, 65, (problems, M, n)).astype(np.float64)
    return a, b, c


def exact_chains(a, b, c):
    """C + A_0 B_0^T + .. after every step, exactly (small integers)."""
    return c[:, None] + np.cumsum(np.einsum("psmk,psnk->psmn", a, b), axis=1)


def random_chains(rng: np.random.Generator, problems: int, steps: int, n: int = N):
    """Inputs that stress the k-step's alignment cut: four kinds, one per quarter of the problems."""
    a = np.empty((problems, steps, M, K))
    b = np.empty((problems, steps, n, K))
    c = np.empty((problems, M, n))
    q = problems // 4
    kinds = [(-3, 3, -12, 12), (-24, 24, -40, 40), (-6, 6, -20, 20), (-2, 2, 20, 30)]  # a, b exponent; c exponent
    for i, (lo, hi, clo, chi) in enumerate(kinds):
        sl = slice(i * q, problems if i == 3 else (i + 1) * q)
        count = sl.stop - sl.start
        a[sl] = _bf16(rng, (count, steps, M, K), lo, hi)
        b[sl] = _bf16(rng, (count, steps, n, K), lo, hi)
        c[sl] = np.float32(rng.choice([-1.0, 1.0], (count, M, n)) * np.ldexp(1 + rng.random((count, M, n)),
                                                                           rng.integers(clo, chi + 1, (count, M, n))))
        if i == 2:  # cancellation: the second half of every k-step's products undoes the first, almost
            a[sl][..., 8:] = a[sl][..., :8]
            b[sl][..., 8:] = -b[sl][..., :8] * (1 + rng.choice([0.0, 2.0**-7, -(2.0**-7)], (count, steps, n, 8)))
    return (bf16_values(bf16_bits(a)), bf16_values(bf16_bits(b)), c.astype(np.float32).astype(np.float64))


def model_steps(a, b, c_in, xp=np):
    """The model's result of every step given its input accumulator: [P, S, M, N] from c_in [P, S, M, N]."""
    n = b.shape[2]
    aa = xp.broadcast_to(a[:, :, :, None, :], a.shape[:3] + (n, K))
    bb = xp.broadcast_to(b[:, :, None, :, :], b.shape[:2] + (M, n, K))
    return kstep(c_in, aa, bb, xp)


def step_inputs(c, d):
    """Each step's input accumulator: C, then the device's previous output."""
    xp = np if isinstance(d, np.ndarray) else _cupy()
    return xp.concatenate([c[:, None], d[:, :-1]], axis=1)


def compare(name: str, got, want) -> dict:
    """Word-for-word agreement of two fp32 arrays held as float64 (NaN never expected)."""
    xp = np if isinstance(got, np.ndarray) else _cupy()
    g = got.astype(xp.float32).view(xp.uint32)
    w = want.astype(xp.float32).view(xp.uint32)
    bad = g != w
    n_bad = int(bad.sum())
    first = []
    if n_bad:
        idx = xp.argwhere(bad)[:3]
        first = [{"index": [int(v) for v in i], "got": float(got[tuple(i)]), "want": float(want[tuple(i)])}
                 for i in (idx.get() if hasattr(idx, "get") else idx)]
    return {"what": name, "sums": int(bad.size), "different": n_bad, "first": first}


def _cupy():
    import cupy

    return cupy


class Gpu:
    """The probe's cubin on the GPU."""

    def __init__(self, cubin: Path):
        cp = _cupy()
        self.cp = cp
        module = cp.RawModule(path=str(cubin))
        self.kernels = {n: module.get_function(n) for n in ("chain_wgmma", "chain_mma_sync", "ceiling_wgmma",
                                                              "tile_wgmma_n64", "tile_mma_sync_n64")}

    def chain(self, name: str, a, b, c) -> np.ndarray:
        cp = self.cp
        problems, steps = a.shape[:2]
        da = cp.asarray(bf16_bits(a))
        db = cp.asarray(bf16_bits(b))
        dc = cp.asarray(c.astype(np.float32))
        dd = cp.full((problems, steps, M, N), np.float32(np.nan), np.float32)  # poisoned
        self.kernels[name]((problems,), (128,), (da, db, dc, dd, np.int32(steps)))
        cp.cuda.runtime.deviceSynchronize()
        return dd

    def tile(self, a, b, c, form: int | None = None, lbo: int = 0, sbo: int = 0, mode: int = 0):
        """m64n64k16 chains: wgmma in `form` with those descriptor fields, or mma.sync where form is None."""
        cp = self.cp
        problems, steps = a.shape[:2]
        args = [cp.asarray(bf16_bits(a)), cp.asarray(bf16_bits(b)), cp.asarray(c.astype(np.float32)),
                cp.full((problems, steps, M, 64), np.float32(np.nan), np.float32), np.int32(steps)]
        if form is None:
            self.kernels["tile_mma_sync_n64"]((problems,), (128,), tuple(args))
        else:
            extra = (np.int32(form), np.int32(lbo), np.int32(sbo), np.int32(mode))
            self.kernels["tile_wgmma_n64"]((problems,), (128,), tuple(args) + extra)
        cp.cuda.runtime.deviceSynchronize()
        return args[3]

    def ceiling(self, per_sm: int, iters: int = 4096, repeat: int = 5) -> dict:
        """m64n256k16 back to back, `per_sm` warpgroups per SM in one wave (three fit at 154 registers)."""
        cp = self.cp
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        blocks = sms * per_sm
        src = cp.asarray(bf16_bits(_bf16(np.random.default_rng(1), (64 * 16 + 256 * 16,), -2, 2)))
        out = cp.zeros(blocks * 128, np.float32)
        kernel = self.kernels["ceiling_wgmma"]
        kernel((blocks,), (128,), (src, out, np.int32(64)))  # warm
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        best = float("inf")
        for _ in range(repeat):
            start.record()
            kernel((blocks,), (128,), (src, out, np.int32(iters)))
            stop.record()
            stop.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, stop) / 1e3)
        flops = blocks * iters * 8 * 2.0 * 64 * 256 * 16
        return {"sms": sms, "blocks": blocks, "seconds": best, "tflops": flops / best / 1e12}


FORMS = {  # the prompt kernel's m64n64k16 forms -> descriptor candidates (leading, stride bytes, swizzle mode)
    0: ("Q K^T: A and B from shared memory, K-major, 128-byte swizzle",
        [(16, 1024, 1), (1024, 16, 1), (0, 1024, 1), (16, 1024, 2)]),
    1: ("p V: A in registers, B MN-major with the 128-byte swizzle, transposed",
        [(1024, 1024, 1), (16, 1024, 1), (1024, 16, 1), (2048, 1024, 1)]),  # a larger stride reads past the tile
}


def layouts(gpu, rng, problems: int) -> dict:
    """Each form: which descriptor candidates give exact integer chains; then, with the first that does, random
    chains against mma.sync and against the model."""
    found = {}
    ia, ib, ic = integer_chains(rng, 32, 4, 64)
    exact = exact_chains(ia, ib, ic)
    ra, rb, rc = random_chains(rng, problems, 4, 64)
    cp = gpu.cp
    d_mma = gpu.tile(ra, rb, rc).astype(cp.float64)
    ga, gb, gc = cp.asarray(ra), cp.asarray(rb), cp.asarray(rc)
    for form, (what, candidates) in FORMS.items():
        rows = []
        for lbo, sbo, mode in candidates:
            got = gpu.tile(ia, ib, ic, form, lbo, sbo, mode)
            got = (got.get() if hasattr(got, "get") else got).astype(np.float64)
            rows.append({"lbo": lbo, "sbo": sbo, "mode": mode, "exact": bool(np.array_equal(got, exact)),
                         "wrong": int((got != exact).sum())})
        entry = {"form": what, "candidates": rows}
        good = next((r for r in rows if r["exact"]), None)
        if good:
            d_wg = gpu.tile(ra, rb, rc, form, good["lbo"], good["sbo"], good["mode"]).astype(cp.float64)
            entry["vs_mma_sync"] = compare(f"form {form} vs mma.sync", d_wg, d_mma)
            entry["vs_model"] = compare(f"form {form} vs model", d_wg, model_steps(ga, gb, step_inputs(gc, d_wg), cp))
        found[form] = entry
        print(f"form {form} ({what}): exact with "
              f"{[(r['lbo'], r['sbo'], r['mode']) for r in rows if r['exact']] or 'none'}"
              + (f"; random: {entry['vs_mma_sync']['different']} of {entry['vs_mma_sync']['sums']} differ from "
                 f"mma.sync, {entry['vs_model']['different']} from the model" if good else ""), flush=True)
    return found


def run(out: Path, problems: int, steps: int, seed: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    cp = _cupy()
    gpu = Gpu(CUBIN)
    report: dict = {"problems": problems, "steps": steps, "seed": seed}
    rng = np.random.default_rng(seed)

    a, b, c = integer_chains(rng, 64, 4)
    exact = exact_chains(a, b, c)
    layout = [compare(f"layout {name}", gpu.chain(name, a, b, c).get().astype(np.float64), exact)
              for name in ("chain_wgmma", "chain_mma_sync")]
    report["layout"] = layout
    ok = all(r["different"] == 0 for r in layout)
    print("LAYOUT OK" if ok else f"LAYOUT FAIL {json.dumps(layout)[:600]}", flush=True)
    if not ok:
        (out / "wgmma_probe.json").write_text(json.dumps(report, indent=1))
        return 2

    a, b, c = random_chains(rng, problems, steps)
    began = time.perf_counter()
    d_wg = gpu.chain("chain_wgmma", a, b, c).astype(cp.float64)
    d_mma = gpu.chain("chain_mma_sync", a, b, c).astype(cp.float64)
    report["wgmma_vs_mma_sync"] = compare("wgmma vs mma.sync", d_wg, d_mma)
    ga, gb, gc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
    report["wgmma_vs_model"] = compare("wgmma vs model", d_wg, model_steps(ga, gb, step_inputs(gc, d_wg), cp))
    report["mma_sync_vs_model"] = compare("mma.sync vs model", d_mma, model_steps(ga, gb, step_inputs(gc, d_mma), cp))
    report["compare_seconds"] = time.perf_counter() - began
    report["layouts"] = layouts(gpu, rng, problems // 4)
    report["ceilings"] = [gpu.ceiling(per_sm) for per_sm in (1, 2, 3)]
    report["ceiling"] = max(report["ceilings"], key=lambda r: r["tflops"])
    (out / "wgmma_probe.json").write_text(json.dumps(report, indent=1))
    for key in ("wgmma_vs_mma_sync", "wgmma_vs_model", "mma_sync_vs_model"):
        r = report[key]
        print(f"{r['what']}: {r['sums']} sums, {r['different']} different {r['first'][:1]}")
    ce = report["ceiling"]
    for r in report["ceilings"]:
        print(f"wgmma m64n256k16 bf16: {r['tflops']:.0f} TFLOP/s ({r['blocks']} warpgroups on {r['sms']} SMs)")
    print(f"wgmma ceiling: {ce['tflops']:.0f} TFLOP/s")
    same = all(report[k]["different"] == 0 for k in ("wgmma_vs_mma_sync", "wgmma_vs_model")) and all(
        "vs_model" in f and f["vs_model"]["different"] == 0 and f["vs_mma_sync"]["different"] == 0
        for f in report["layouts"].values())
    print("MATCH: wgmma accumulates as the model" if same else "DIFFERENT: see wgmma_probe.json")
    return 0 if same else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--build", action="store_true", help="compile the cubin here (NVRTC, sm_90a)")
    ap.add_argument("--problems", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--seed", type=int, default=20261201)
    args = ap.parse_args(argv)
    if args.build:
        print(f"built {build()}")
        return 0
    if args.out is None:
        ap.error("give OUTDIR (on the GPU) or --build (here)")
    return run(args.out, args.problems, args.steps, args.seed)


if __name__ == "__main__":
    sys.exit(main())
