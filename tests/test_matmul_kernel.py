"""The wgmma matmul kernel's plumbing without a GPU: what it exports on each SM, the launches and tensor maps the
matmul family builds from those exports, the refusals of shapes it cannot take, and the tensor maps' own rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kcontract.contract.loader import load_contract
from kcontract.errors import ContractError, UsageError
from kcontract.families.matmul.family import bits, exact_rows, order_rows, stress_rows
from kcontract.families.matmul.spec import Arithmetic
from kcontract.gatetable import Suite
from kcontract.launch.tensormap import problems
from kcontract.numerics import from_bits
from kcontract.problem import TensorMap
from kcontract.toolchain.exports import family_exports
from tests.test_exports import toolchain

ROOT = Path(__file__).resolve().parents[1]
STAGES, TILE_M, TILE_K = 4, 128, 64  # kernels/matmul.cu's layout, as its header comment documents it


@pytest.fixture(scope="module")
def loaded():
    toolchain()
    return load_contract(str(ROOT / "contract.yaml"), import_kernels=False)


def family_of(loaded, name: str):
    entry = loaded.entry(name)
    family = entry.fresh_family(loaded.model.seed)
    family.exports = family_exports(loaded, entry.kernel.cuda, family)
    return family


def test_the_kernel_exports_its_tiles_and_shared_memory_per_sm(loaded):
    """Tiles are the same on every SM; the launch's bytes (stages of a's 128 and b's BN rows of 128 bytes, 1 KiB of
    alignment, two mbarriers a stage) only where wgmma runs, else 0."""
    from kcontract.toolchain.exports import launch_exports

    for name, tile_n in (("matmul_qkv_k4096_n6144", 256), ("matmul_kv_k4096_n2048", 128)):
        entry = loaded.entry(name)
        found, errors = launch_exports(loaded, entry.kernel.cuda, entry.kernel.cuda, list(loaded.targets))
        assert not errors
        for sm, values in found.items():
            assert (values["tile_m"], values["tile_n"], values["tile_k"], values["multiple"]) == (128, tile_n, 64, 8)
            assert values["threads"] == 384
            stage = (TILE_M + tile_n) * TILE_K * 2
            assert values["smem"] == (1024 + STAGES * stage + 2 * STAGES * 8 if sm in ("sm_90a", "sm_100") else 0), sm


def test_launches_come_from_the_exports_and_split_k(loaded):
    family = family_of(loaded, "matmul_down_k16384_n4096")
    problem = family.checks(Suite.REALISTIC, "m1000_k16384_n4096")[0].problem
    (launch,) = problem.launches
    assert launch.grid == (4096 // 256, -(-1000 // 128), 3)
    assert launch.args == ("a_map", "b_map", "out", "m", "n", "k")
    assert launch.tensor_maps == {"a_map": TensorMap("a", (64, 128)), "b_map": TensorMap("b", (64, 256))}
    assert problem.inputs["a"].shape == (1000, 16384) and problem.outputs["out"].shape == (1000, 4096)


def test_gate_2_adds_order_probes_where_k_has_pieces(loaded):
    """Two or more pieces: the batches run again on order probes, labelled so; K whole: the realistic rows only."""
    sets = family_of(loaded, "matmul_down_k16384_n4096").invariance(Suite.VARIANTS, "m7_k16384_n4096")
    assert len(sets) == 2 and all(s.case == "m7_k16384_n4096" for s in sets)
    assert {v.label.startswith("order_probes/") for v in sets[1].variants} == {True}
    assert len(sets[1].variants) == len(sets[0].variants) and sets[1].base.label.endswith("/order_probes/base")
    assert len(family_of(loaded, "matmul_logits_k4096_n16384_fp32").invariance(Suite.VARIANTS,
                                                                              "m64_k4096_n16384")) == 1


def fp32_chain(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x w^T as one fp32 chain along K, a term at a time."""
    acc = np.zeros((x.shape[0], w.shape[0]), np.float32)
    for i in range(x.shape[1]):
        acc = (acc + np.outer(x[:, i], w[:, i]).astype(np.float32)).astype(np.float32)
    return acc


def test_order_probes_separate_the_declared_merge_from_another_order_and_split():
    """On the probes a merge in another order, or K in other pieces, changes most bf16 outputs; on the realistic
    rows they lie far apart too rarely for a few thousand outputs to show it."""
    rng = np.random.default_rng(7)
    k, n, pieces = 768, 48, [(0, 256), (256, 512), (512, 768)]
    a = bits(rng.standard_normal((8, k)) * 10.0 ** rng.uniform(-1, 1, size=(8, 1)))
    b = bits(rng.standard_normal((n, k)) / np.sqrt(k))
    flips = {}
    for name, rows in (("realistic", {"a": a, "b": b}), ("probes", order_rows(a, b, pieces, rng))):
        x, w = from_bits(rows["a"], "bf16"), from_bits(rows["b"], "bf16")
        p = [fp32_chain(x[:, lo:hi], w[:, lo:hi]) for lo, hi in pieces]
        declared = bits((p[0] + p[1]).astype(np.float32) + p[2])
        rotated = bits((p[1] + p[2]).astype(np.float32) + p[0])
        whole = bits(fp32_chain(x, w))
        flips[name] = (np.mean(declared != rotated), np.mean(declared != whole))
    assert min(flips["probes"]) > 0.25 and max(flips["realistic"]) < 0.05, flips


def test_batches_straddle_the_row_tile(loaded):
    """Gate 2 runs a row alone and in batches of one tile less one, one tile, one more and two tiles and one."""
    family = family_of(loaded, "matmul_qkv_k4096_n6144")
    assert {127, 128, 129, 257} <= set(family.batch_sizes())
    labels = [v.label for v in family.invariance(Suite.VARIANTS, "m256_k4096_n6144")[0].variants]
    assert "batch129_last_row20" in labels and "solo_row0" in labels and "concurrent" in labels


def test_a_kernel_whose_tiles_differ_from_the_declaration_is_refused(loaded):
    family = family_of(loaded, "matmul_qkv_k4096_n6144")
    family.spec = family.spec.model_copy(update={"arithmetic": Arithmetic(accumulate="mma_bf16", split_k=2,
                                                                          k_tile=128)})
    with pytest.raises(UsageError, match="tiles of 64 .* k_tile 128"):
        family.checks(Suite.REALISTIC, "m1_k4096_n6144")
    family = family_of(loaded, "matmul_qkv_k4096_n6144")
    case = family.spec.cases[0].model_copy(update={"k": 4100})
    family.spec = family.spec.model_copy(update={"cases": [case]})
    with pytest.raises(UsageError, match="K 4100 and N 6144 must be multiples of 8"):
        family.checks(Suite.REALISTIC, case.name)


def test_a_cuda_kernel_without_its_tiles_is_refused_at_load(tmp_path):
    text = (ROOT / "contract.yaml").read_text()
    cut = text.replace('        tile_m: "mm::kExportTileM"\n', "", 1)
    assert cut != text
    path = tmp_path / "contract.yaml"
    path.write_text(cut)
    (tmp_path / "kernels").symlink_to(ROOT / "kernels")
    with pytest.raises(ContractError, match="`exports` that give tile_m: family matmul launches its CUDA kernels"):
        load_contract(str(path), import_kernels=False)


def test_pieces_are_whole_tiles_and_cover_k():
    for k, split in ((4096, 2), (4136, 2), (16384, 4), (100, 8), (64, 3)):
        arith = Arithmetic(split_k=split)
        pieces = arith.pieces(k)
        assert len(pieces) == split and pieces[0][0] == 0 and pieces[-1][1] == k
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
        assert all(lo % 64 == 0 and hi - lo <= arith.piece_terms(k) for lo, hi in pieces if hi > lo)


def test_stress_pairs_cancel_and_exact_rows_are_odd():
    rng = np.random.default_rng(5)
    pieces = Arithmetic(split_k=4).pieces(1024)
    drawn = stress_rows(bits(rng.standard_normal((3, 1024))), bits(rng.standard_normal((5, 1024)) / 32), pieces, rng)
    a, b = from_bits(drawn["a"], "bf16"), from_bits(drawn["b"], "bf16")
    partials = np.stack([a[:, lo:hi] @ b[:, lo:hi].T for lo, hi in pieces])
    assert np.all(np.abs(partials).max(axis=0) > 50 * np.abs(partials.sum(axis=0)))  # the pieces cancel
    drawn = exact_rows(rng, 4, 6, 1000, Arithmetic(split_k=4).pieces(1000))
    dot = from_bits(drawn["a"], "bf16") @ from_bits(drawn["b"], "bf16").T
    assert np.all(dot % 2 == 1)  # never a zero


@pytest.mark.parametrize("shape, spec, why", [
    ((7, 4100), TensorMap("a", (64, 128)), "rows of a multiple of 16 bytes"),
    ((7, 4096), TensorMap("a", (64, 512)), "box dimensions from 1 to 256"),
    ((7, 4096), TensorMap("a", (128, 64)), "a box row of at most the 128-byte swizzle"),
    ((7, 4096), TensorMap("a", (64, 64), fmt="int8"), "a format in"),
    ((3, 7, 4096), TensorMap("a", (64, 64)), "a 2D input"),
])
def test_tensor_maps_refuse_what_the_driver_would(shape, spec, why):
    assert why in problems(shape, spec)
    assert problems((7, 4096), TensorMap("a", (64, 128))) is None


def test_the_cuda_launcher_passes_tensor_maps_in_parameter_order_encoded_once_per_buffer(monkeypatch):
    """launch_steps puts each map where its launch names it, encodes a buffer's map once, and names a missing input."""
    from kcontract.launch import tensormap
    from kcontract.launch.base import KernelFailure
    from kcontract.launch.cuda import CudaLauncher
    from kcontract.problem import KernelLaunch, LaunchShape

    class Buffer:
        def __init__(self, ptr, shape):
            self.data, self.shape = type("Ptr", (), {"ptr": ptr})(), shape

    encoded, calls = [], []
    monkeypatch.setattr(tensormap, "encode", lambda array, spec, label: encoded.append(spec) or ("map", spec.input))
    launcher = object.__new__(CudaLauncher)
    launcher.maps, launcher.smem = {}, {"matmul": 4096}
    launcher.shapes = {"matmul": LaunchShape("matmul", 384)}
    launcher.functions = {"matmul": lambda grid, block, args, shared_mem, stream: calls.append((grid, block, args))}
    step = KernelLaunch("matmul", (2, 1, 1), ("a_map", "out", "b_map", "k"),
                        {"a_map": TensorMap("a", (64, 128)), "b_map": TensorMap("b", (64, 256))})
    values = {"a": Buffer(1, (7, 64)), "b": Buffer(2, (256, 64)), "out": "OUT", "k": 64}
    launcher.launch_steps((step, step), values, stream=None, label="call")
    assert calls == [((2, 1, 1), (384, 1, 1), (("map", "a"), "OUT", ("map", "b"), 64))] * 2
    assert encoded == [TensorMap("a", (64, 128)), TensorMap("b", (64, 256))]
    with pytest.raises(KernelFailure, match="call lost: a tensor map of b, which the problem does not hold"):
        launcher.launch_steps((step,), {"a": values["a"], "out": "OUT", "k": 64}, stream=None, label="lost")
