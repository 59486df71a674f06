"""tools/mma/wgmma_probe.py on a CPU: its comparison against the k-step model, and its kernels built for sm_90a."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "mma"))
import wgmma_probe as probe  # noqa: E402


def _model_device(a, b, c):
    """A stand-in device that is the model: each step fed its own previous accumulator."""
    d = np.empty(a.shape[:2] + (probe.M, b.shape[2]))
    acc = c
    for s in range(a.shape[1]):
        acc = probe.model_steps(a[:, s:s + 1], b[:, s:s + 1], acc[:, None])[:, 0]
        d[:, s] = acc
    return d


def test_a_device_that_is_the_model_matches_and_one_ulp_off_is_named():
    a, b, c = probe.random_chains(np.random.default_rng(3), 8, 3)
    d = _model_device(a, b, c)
    assert probe.compare("self", d, probe.model_steps(a, b, probe.step_inputs(c, d)))["different"] == 0
    off = d.copy()
    off[5, 2, 40, 7] = np.nextafter(np.float32(off[5, 2, 40, 7]), np.float32(np.inf))
    report = probe.compare("off", off, probe.model_steps(a, b, probe.step_inputs(c, off)))
    assert report["different"] == 1 and report["first"][0]["index"] == [5, 2, 40, 7]


def test_the_random_chains_stress_the_cut_and_hold_bf16_values():
    a, b, c = probe.random_chains(np.random.default_rng(4), 8, 2)
    assert np.array_equal(probe.bf16_values(probe.bf16_bits(a)), a)
    assert np.array_equal(c.astype(np.float32).astype(np.float64), c)
    spread = np.log2(np.abs(a[2:4][a[2:4] != 0]))
    assert spread.max() - spread.min() > 40  # the wide quarter spans far more than the 25 kept bits
    quarter = slice(4, 6)  # cancellation: products of k and k + 8 nearly undo each other
    assert np.array_equal(a[quarter][..., 8:], a[quarter][..., :8])


def test_integer_chains_are_exact_in_fp32():
    a, b, c = probe.integer_chains(np.random.default_rng(5), 4, 4)
    exact = c[:, None] + np.cumsum(np.einsum("psmk,psnk->psmn", a, b), axis=1)
    assert np.abs(exact).max() < 2**24


def test_the_probe_builds_for_sm_90a_with_wgmma(tmp_path, monkeypatch):
    from kcontract.toolchain.tools import run_tool

    monkeypatch.setattr(probe, "CUBIN", tmp_path / "wgmma_probe.cubin")
    cubin = probe.build()
    sass = run_tool("nvdisasm", ["-c", str(cubin)])
    assert "HGMMA.64x8x16.F32.BF16" in sass and "HGMMA.64x256x16.F32.BF16" in sass
    assert "HGMMA.64x64x16.F32.BF16" in sass and ".tnspB" in sass  # the prompt kernel's forms
    assert "HMMA.16816.F32.BF16" in sass  # the mma.sync chain it is compared with


class _ModelGpu:
    """A stand-in GPU whose wgmma is the model, laid out right only for one descriptor candidate per form."""

    cp = np

    def tile(self, a, b, c, form=None, lbo=0, sbo=0, mode=0):
        right = form is None or (lbo, sbo, mode) == probe.FORMS[form][1][-1]
        d = _model_device(a, b if right else b[:, :, ::-1], c)
        return d.astype(np.float32)


def test_layouts_name_the_descriptor_that_is_exact_and_compare_with_it():
    found = probe.layouts(_ModelGpu(), np.random.default_rng(6), 4)
    for form, (_, candidates) in probe.FORMS.items():
        exact = [(r["lbo"], r["sbo"], r["mode"]) for r in found[form]["candidates"] if r["exact"]]
        assert exact == [candidates[-1]]
        assert found[form]["vs_model"]["different"] == 0 and found[form]["vs_mma_sync"]["different"] == 0
