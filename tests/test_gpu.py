"""On a GPU (pytest -m gpu): the CUDA launcher, fault isolation, device Python kernels and the controls.

Every test here skips, with its reason, where CuPy sees no GPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kcontract.launch import gpu_present
from kcontract.gatetable import Suite

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_present(), reason="no CUDA GPU (or no CuPy) here")]


def kcontract(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """kcontract as the GPU machine runs it (`python3 -m kcontract`, where nothing is installed)."""
    env = dict(os.environ, COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "kcontract", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_faulting_and_hanging_kernels_are_named_and_the_run_goes_on():
    proc = kcontract("run", "--contract", "tests/contracts/gpu_faults.yaml", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("SUMMARY 5 kernels: 2 pass gates 1 and 3, 3 fail, 0 known findings; 0 controls: 0 red as planted, "
            "0 missed; 0 limit problems") in proc.stdout, proc.stdout + proc.stderr  # the gates the entries list
    assert re.search(r"^faults gate 1: error: kernel \.\./cuda/faults\.cu failed in call small: .*illegal", proc.stdout,
                     re.M | re.I), proc.stdout
    # 16 bytes more than the layout: the kernel traps rather than run on a launch its contract misstates
    assert re.search(r"^wrong_smem gate 1: error: kernel \.\./\.\./kernels/window_decode\.cu failed in call small: ",
                     proc.stdout, re.M), proc.stdout
    assert re.search(r"^hangs gate 1: timed out: no answer within 20 s", proc.stdout, re.M)
    assert re.search(r"^after gate 3 split-merge stress: pass", proc.stdout, re.M)


def test_a_python_kernel_on_device_arrays_runs_its_gates():
    proc = kcontract("run", "--contract", "tests/contracts/gpu_device.yaml", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUMMARY 1 kernels: 1 pass gates 1-4" in proc.stdout


def test_the_cuda_launcher_poisons_and_writes_every_output():
    from kcontract.contract.loader import load_contract
    from kcontract.launch import launcher_for

    loaded = load_contract(str(ROOT / "contract.yaml"))
    entry = loaded.entry("decode_d128_g4_global")
    launcher = launcher_for(entry.kernel, loaded, entry)
    checked = entry.family.checks(Suite.REALISTIC, entry.family.cases(Suite.REALISTIC)[0])[0]
    outputs = launcher.run(checked.problem)
    assert not np.any((outputs["out"] & 0x7F80 == 0x7F80) & (outputs["out"] & 0x7F != 0))
    assert launcher.provenance()["sm"].startswith("sm_") and len(launcher.provenance()["cubin_sha256"]) == 64
    assert launcher.attribute_mismatches(loaded, entry.name) == []
    launcher.close()


def references_on(module: str, checked):
    """A checked problem's reference computed with numpy or CuPy."""
    from kcontract.numerics import xp

    os.environ["KCONTRACT_REFERENCES"] = module
    xp.reference_module.cache_clear()
    try:
        return checked.compute_reference()
    finally:
        os.environ.pop("KCONTRACT_REFERENCES")
        xp.reference_module.cache_clear()


REFERENCE_BUDGET = 100_000_000  # case bytes per family whose references numpy computes beside CuPy


def test_gpu_and_numpy_references_agree_on_every_family():
    """Both are rigorous: their ranges overlap everywhere, centers agree to float64 noise, decisions match."""
    from kcontract.contract.loader import load_contract
    from kcontract.builds.builds import Builds

    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    builds = Builds.of(loaded)
    families = {}
    for entry in loaded.entries:
        families.setdefault(entry.family.name, []).append(entry)
    for name, entries in families.items():
        size = {e.name: max(e.family.case_bytes(c) for c in e.family.cases(Suite.REALISTIC)) for e in entries}
        entries.sort(key=lambda e: size[e.name])
        picked = [e for i, e in enumerate(entries)  # the smallest, and more within a budget: numpy is the slow side
                  if i == 0 or sum(size[x.name] for x in entries[:i + 1]) <= REFERENCE_BUDGET]
        for entry in picked:
            family = entry.family
            family.exports = builds.family_exports(entry.kernel.cuda, family)
            for suite in (Suite.REALISTIC, Suite.STRESS):
                for case in family.cases(suite)[-1:]:
                    checked = family.checks(suite, case)[0]
                    cpu, gpu = references_on("numpy", checked), references_on("cupy", checked)
                    for a, b in zip(cpu.expected, gpu.expected):
                        assert np.all(a.lo <= b.hi) and np.all(b.lo <= a.hi), (name, entry.name, case)
                        scale = np.abs(a.center) + np.abs(a.hi - a.lo) + 1e-30
                        assert np.max(np.abs(a.center - b.center) / scale) < 1e-9, (name, entry.name, case)
                        same = (a.lo == a.hi) == (b.lo == b.hi)
                        assert same.mean() > 0.999, (name, entry.name, case, same.mean())
                        both = (a.lo == a.hi) & (b.lo == b.hi)
                        assert np.array_equal(a.lo[both], b.lo[both]), (name, entry.name, case)


def test_the_sanitizer_finds_the_missing_barrier_and_nothing_in_its_entry(tmp_path):
    report = tmp_path / "sanitize.json"
    proc = kcontract("run", "--sanitize", "--only", "decode_d256_g8_sliding", "--jobs", "8", "--json", str(report),
                     timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert ("SANITIZE 1 kernels under initcheck, memcheck, racecheck, synccheck: 1 clean, 0 not; controls with "
            "errors:") in proc.stdout
    assert "planted and missed: 0" in proc.stdout and "decode_missing_syncthreads" in proc.stdout


@pytest.mark.parametrize("order, p_round", [("split_lanes", "none"), ("split_mma", "none"),
                                            ("split_mma", "bf16")])
def test_the_declared_order_replays_alike_on_cupy_and_numpy(order, p_round):
    import cupy

    from kcontract.families.attention.replay import replay_row
    from kcontract.numerics import round_to

    rng = np.random.default_rng(4)
    q = round_to(rng.standard_normal((8, 256)), "bf16")
    k = round_to(rng.standard_normal((3000, 1, 256)) * 0.1, "bf16")
    v = round_to(rng.standard_normal((3000, 1, 256)), "bf16")
    counts = {"pv_key_groups": 4, "merge_runs": 8}  # the split decode kernel's at head dim 256, 8 heads per key head
    cpu = replay_row(q, k, v, 40, 3039, 0.0625, 256, 8, xp=np, order=order, p_round=p_round, kernel=counts)
    gpu = replay_row(q, k, v, 40, 3039, 0.0625, 256, 8, xp=cupy, order=order, p_round=p_round, kernel=counts)
    for name in ("m", "l", "o", "out"):
        assert np.all(cpu[name][0] <= gpu[name][1]) and np.all(gpu[name][0] <= cpu[name][1]), name
    assert np.array_equal(cpu["m"][0], gpu["m"][0])  # the replayed scores are the same bits
    assert np.mean((cpu["out"][0] == cpu["out"][1]) == (gpu["out"][0] == gpu["out"][1])) > 0.999


@pytest.mark.parametrize("chains", [1, 2])
def test_the_online_order_in_merge_chains_replays_alike_on_cupy_and_numpy(chains):
    """Two rows of 17 chunks replayed together, one from an even chunk, one from an odd one."""
    import cupy

    from kcontract.families.attention.replay import replay_rows
    from kcontract.numerics import round_to

    rng = np.random.default_rng(5)
    q = round_to(rng.standard_normal((8, 256)), "bf16")
    k = round_to(rng.standard_normal((1100, 1, 256)) * 0.1, "bf16")
    v = round_to(rng.standard_normal((1100, 1, 256)), "bf16")
    rows = [(q, k[first:pos + 1], v[first:pos + 1], first, pos, None) for first, pos in ((40, 1039), (100, 1099))]
    kw = dict(order="online_mma", p_round="bf16", grouping="natural", chains=chains)
    cpu = replay_rows(rows, 0.0625, 64, 8, xp=np, **kw)
    gpu = replay_rows(rows, 0.0625, 64, 8, xp=cupy, **kw)
    for c, g in zip(cpu, gpu):
        assert np.all(c["out"][0] <= g["out"][1]) and np.all(g["out"][0] <= c["out"][1])
        assert np.array_equal(c["row_m"][0], g["row_m"][0])
        assert np.mean((c["out"][0] == c["out"][1]) == (g["out"][0] == g["out"][1])) > 0.999


def test_coverage_counts_the_lines_an_entrys_cases_run(tmp_path):
    report = tmp_path / "coverage.json"
    proc = kcontract("coverage", "rmsnorm_residual_h8192", "--json", str(report), timeout=600)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    import json

    found = json.loads(report.read_text())["rmsnorm_residual_h8192"]
    assert found["lines"]["executed"] > 0 and found["lines"]["reachable"] >= found["lines"]["executed"]
    assert re.search(r"^coverage rmsnorm_residual_h8192 \(kernels/rms_norm\.cu\): lines \d+ of \d+", proc.stdout, re.M)


def test_fused_fp32_kernels_give_the_numpy_bits():
    """add32, fma32 and rn32 as one CuPy kernel each equal the numpy steps bit for bit, ties and subnormals too."""
    import cupy

    from kcontract.numerics.fp32 import add32, fma32, rn32

    rng = np.random.default_rng(6)
    a = rng.standard_normal(1 << 20).astype(np.float32).astype(np.float64)
    ulp = np.spacing(a.astype(np.float32)).astype(np.float64)
    b = np.where(rng.random(a.size) < 0.5, ulp * rng.integers(-4, 5, a.size) / 2,
                 rng.standard_normal(a.size).astype(np.float32))  # half-ulp ties and ordinary terms
    b[:64] = np.float32(2.0**-149) * np.arange(64)  # subnormal steps
    a[64:128], b[64:128] = np.float64(np.finfo(np.float32).max), np.float64(np.finfo(np.float32).max)  # overflow
    c = rng.standard_normal(a.size).astype(np.float32).astype(np.float64)
    s = a + b
    err = (a - (s - (s - a))) + (b - (s - a))
    for name, host, device in (
            ("add32", add32(a, b), add32(cupy.asarray(a), cupy.asarray(b))),
            ("fma32", fma32(a, c, b), fma32(cupy.asarray(a), cupy.asarray(c), cupy.asarray(b))),
            ("rn32", rn32(s, err), rn32(cupy.asarray(s), cupy.asarray(err)))):
        assert np.array_equal(host.view(np.uint64), device.get().view(np.uint64)), name


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp32"])
def test_fused_round_to_gives_the_numpy_bits(fmt):
    """round_to as one CuPy kernel equals numpy's on any float64 bits: subnormals, ties, overflow, NaN and zeros."""
    import cupy

    from kcontract.numerics import round_to

    rng = np.random.default_rng(7)
    x = np.concatenate([rng.integers(0, 2**64, 1 << 20, dtype=np.uint64).view(np.float64),
                        rng.standard_normal(1 << 20) * np.exp2(rng.integers(-160, 140, 1 << 20)),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 65519.99, 65520.0, 3.41e38, 2.0**-149 * 1.5]])
    host, device = round_to(x, fmt), round_to(cupy.asarray(x), fmt).get()
    assert np.array_equal(host.view(np.uint64)[~np.isnan(host)], device.view(np.uint64)[~np.isnan(host)])
    assert np.array_equal(np.isnan(host), np.isnan(device))


def test_fused_kstep_dots_give_the_numpy_bits():
    """The tensor-core dot replay as one CuPy kernel equals numpy's k-steps bit for bit, zero rows included."""
    import cupy

    from kcontract.numerics import round_to
    from kcontract.families.attention.tensorcore import kstep_dims
    from kcontract.numerics.tensorcore import kstep_dots

    rng = np.random.default_rng(8)
    a = round_to(rng.standard_normal((16, 512)) * np.exp2(rng.integers(-30, 30, (16, 512))), "bf16")
    b = round_to(rng.standard_normal((1000, 512)) * np.exp2(rng.integers(-30, 30, (1000, 512))), "bf16")
    a[0], b[1, :256] = 0.0, 0.0
    for grouping in ("decode", "natural"):
        groups = kstep_dims(512, grouping)
        with np.errstate(all="ignore"):
            host = kstep_dots(a, b, groups, np)
        device = kstep_dots(cupy.asarray(a), cupy.asarray(b), groups, cupy).get()
        assert np.array_equal(host.view(np.uint64), device.view(np.uint64)), grouping


def test_live_bytes_follow_the_device_arrays_not_the_pools_cache():
    import cupy

    from kcontract.profiling import MB, measuring, tracking_gpu_live

    pool = cupy.get_default_memory_pool()
    before = pool.used_bytes()
    with measuring() as clock, tracking_gpu_live():
        first = cupy.empty(256 * MB, dtype=cupy.uint8)
        del first  # its block stays in the pool's cache
        kept = [cupy.empty(64 * MB, dtype=cupy.uint8) for _ in range(2)]
    assert clock.gpu_live == 256 * MB, (clock.gpu_live, before)  # its own blocks, whatever was held before
    assert pool.total_bytes() >= before + 256 * MB and len(kept) == 2
