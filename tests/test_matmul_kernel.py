"""The wgmma matmul kernel's plumbing without a GPU: what it exports on each SM, the launches and tensor maps the
matmul family builds from those exports, the refusals of shapes it cannot take, and the tensor maps' own rules."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kcontract.builds.builds import Builds
from kcontract.contract.kernels import only_launched
from kcontract.contract.loader import load_contract
from kcontract.contract.model import CudaKernel
from kcontract.errors import ContractError, UsageError
from kcontract.families.matmul.family import bits, exact_rows, order_rows, stress_rows
from kcontract.families.matmul.spec import Arithmetic
from kcontract.gatetable import Suite
from kcontract.launch.tensormap import problems
from kcontract.numerics import from_bits
from kcontract.problem import TensorMap
from tests.helpers.toolchain import toolchain

ROOT = Path(__file__).resolve().parents[1]
TILE_K, ALIGN, SMEM_LIMIT, MAX_STAGES = 64, 1024, 227 * 1024, 8  # kernels/matmul.cu's layout constants
SMEM_PER_SM, RESERVED = 228 * 1024, 1024  # sm_90's shared memory per SM and what it keeps per block
BLOCKS = {16: 3, 32: 2}  # blocks a narrow tile keeps on one SM (by its columns); one elsewhere
TILES = ((64, 16), (64, 32), (64, 64), (64, 128), (128, 64), (128, 128), (128, 192), (128, 256))  # the symbols


@pytest.fixture(scope="module")
def loaded():
    toolchain()
    return load_contract(str(ROOT / "contract.yaml"), import_kernels=False)


def family_of(loaded, name: str):
    entry = loaded.entry(name)
    family = entry.fresh_family(loaded.model.seed)
    family.exports = Builds.of(loaded).family_exports(entry.kernel.cuda, family)
    return family


def stages_of(tile_m: int, tile_n: int) -> int:
    """The kernel's stage count: as many stages of a's and b's 128-byte rows as fit in the block's share of an SM,
    at most eight."""
    stage = (tile_m + tile_n) * TILE_K * 2
    share = min(SMEM_LIMIT, SMEM_PER_SM // BLOCKS.get(tile_n, 1) - RESERVED)
    return min(MAX_STAGES, (share - ALIGN - 2 * MAX_STAGES * 8) // stage)


def test_the_kernel_exports_its_tiles_and_shared_memory_per_sm(loaded):
    """Each tile symbol exports its tile on every SM; the launch's bytes (its stages of a's and b's rows of 128 bytes,
    1 KiB of alignment, two mbarriers a stage) only where wgmma runs, else 0."""
    entry = loaded.entry("matmul_qkv_k4096_n6144")
    found, errors = Builds.of(loaded).launch_exports(entry.kernel.cuda, entry.kernel.cuda, list(loaded.targets))
    assert not errors
    for sm, values in found.items():
        assert (values["tile_k"], values["multiple"], values["threads"]) == (64, 8, 384)
        for m, n in TILES:
            role = f"m{m}n{n}"
            assert (values[f"{role}_tile_m"], values[f"{role}_tile_n"]) == (m, n)
            stages = stages_of(m, n)
            wanted = ALIGN + stages * (m + n) * TILE_K * 2 + 2 * stages * 8 if sm in ("sm_90a", "sm_100") else 0
            assert values[f"{role}_smem"] == wanted, (sm, role)


def test_launches_follow_the_schedule_and_split_k(loaded):
    """A call launches the symbol its rows schedule, over that symbol's tiles, in clusters of split_k."""
    family = family_of(loaded, "matmul_down_k16384_n4096")
    problem = family.checks(Suite.REALISTIC, "m1000_k16384_n4096")[0].problem
    (launch,) = problem.launches
    assert launch.role == "m128n256" and launch.grid == (4096 // 256, -(-1000 // 128), 2)
    assert launch.args == ("a_map", "b_map", "out", "m", "n", "k")
    assert launch.tensor_maps == {"a_map": TensorMap("a", (64, 128)), "b_map": TensorMap("b", (64, 256))}
    assert problem.inputs["a"].shape == (1000, 16384) and problem.outputs["out"].shape == (1000, 4096)
    (launch,) = family.checks(Suite.REALISTIC, "m7_k16384_n4096")[0].problem.launches
    assert launch.role == "m8n64" and launch.grid == (4096 // 64, 1, 2)  # 8-row tiles up to 8 rows
    assert launch.tensor_maps == {"a_map": TensorMap("a", (64, 7)), "b_map": TensorMap("b", (64, 64))}
    down = family_of(loaded, "matmul_down_k16384_n4096")
    assert [down._launch(m, 16384, 4096)[0].role for m in (1, 8, 9, 64, 65)] == \
        ["m8n64", "m8n64", "m64n64", "m64n64", "m128n128"]
    qkv = family_of(loaded, "matmul_qkv_k4096_n6144")
    assert [qkv._launch(m, 4096, 6144)[0].role for m in (1, 64, 65, 511, 512, 2047, 2048, 4096)] == \
        ["m64n64", "m64n64", "m128n128", "m128n128", "m128n192", "m128n192", "m128n256", "m128n256"]
    assert qkv._launch(512, 4096, 6144)[0].grid == (6144 // 192, 4, 1)


def test_an_entry_of_the_shared_kernel_compiles_and_records_only_the_tiles_its_schedule_launches(loaded):
    """The named kernel lists every tile; each entry keeps the symbols its schedule launches, so a build, its
    records and its mutants hold no tile the entry never runs."""
    router = loaded.entry("matmul_router_k4096_n128_fp32")
    assert list(router.kernel.compiled.symbols) == ["m8n16", "m64n16", "m64n64", "m128n128"]
    assert router.kernel.compiled.symbols["m64n64"] == "matmul<64, 64, 3, 0>"
    assert len(loaded.model.kernels["matmul"].cuda.symbols) == 13  # the contract's kernel as written
    records = json.loads((ROOT / "records" / "cuda-13.5.37" / "matmul_router_k4096_n128_fp32.json").read_text())
    assert sorted(records["kernels"]) == ["m128n128", "m64n16", "m64n64", "m8n16"]


def test_a_kernel_keeps_its_symbols_where_its_family_names_a_role_it_lacks():
    kernel = CudaKernel(source="k.cu", symbols={"a": "k<1>", "b": "k<2>"})
    assert only_launched(kernel, ["a"]).symbols == {"a": "k<1>"}
    assert only_launched(kernel, ["a", "c"]).symbols == kernel.symbols  # the loader reports the missing role
    assert only_launched(kernel, []).symbols == kernel.symbols


def test_gate_2_adds_order_probes_against_every_plausible_split(loaded):
    """The batches run again on order probes built against the declared pieces and 2, 3 and 4 pieces (each split
    once), labelled so, the first set saying how many orders they tell apart; K whole gets them too."""
    sets = family_of(loaded, "matmul_down_k16384_n4096").invariance(Suite.VARIANTS, "m7_k16384_n4096")
    assert [s.base.label for s in sets] == ["m7_k16384_n4096/base", "m7_k16384_n4096/order_probes/declared/base",
                                            "m7_k16384_n4096/order_probes/split3/base",
                                            "m7_k16384_n4096/order_probes/split4/base"]
    assert all(v.label.startswith("order_probes/") for s in sets[1:] for v in s.variants)
    assert sets[1].orders[:2] == (7, 7) and all(s.orders is None for s in sets[2:])
    whole = family_of(loaded, "matmul_qkv_k4096_n6144").invariance(Suite.VARIANTS, "m256_k4096_n6144")
    assert [s.base.label.split("/")[-2] for s in whole[1:]] == ["split2", "split3", "split4"]


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


def test_batches_straddle_the_row_tile_and_every_schedule_edge(loaded):
    """Gate 2 runs a row alone and in batches of one tile less one, one tile, one more and two tiles and one, and
    of one row less than each schedule edge and the edge itself, so every tile the schedule launches is compared."""
    family = family_of(loaded, "matmul_qkv_k4096_n6144")
    assert {63, 64, 65, 127, 128, 129, 257, 511, 512, 2047, 2048} <= set(family.batch_sizes())
    router = family_of(loaded, "matmul_router_k4096_n128_fp32")
    assert {63, 64, 65, 129, 127, 128, 257, 2047, 2048} <= set(router.batch_sizes())
    labels = [v.label for v in family.invariance(Suite.VARIANTS, "m256_k4096_n6144")[0].variants]
    assert {"batch64", "batch65", "batch129"} <= {label.split("_")[0] for label in labels if "_last_" in label}
    assert "solo_row0" in labels and "concurrent" in labels


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
    cut = text.replace('        m128n192_tile_m: "mm::kExportTileM<128>"\n', "", 1)
    assert cut != text
    path = tmp_path / "contract.yaml"
    path.write_text(f"include: [{ROOT / 'kernels'}]\n" + cut)
    (tmp_path / "kernels").symlink_to(ROOT / "kernels")
    with pytest.raises(ContractError, match="`exports` that give m128n192_tile_m: family matmul launches its compiled kernels"):
        load_contract(str(path), import_kernels=False)


@pytest.mark.parametrize("schedule, why", [
    ("{1: m128n128, 512: m96n96}", r"entries\[\d+\]\.kernel: `symbols` that name m96n96: family matmul launches them"),
    ("{2: m128n128}", r"schedule: a symbol from 1 row on \(its first key is 2\)"),
    ("{1: m128n128, 0: m128n256}", r"schedule"),
])
def test_a_schedule_the_kernel_cannot_follow_is_refused_at_load(tmp_path, schedule, why):
    text = (ROOT / "contract.yaml").read_text()
    cut = text.replace("schedule: {1: m64n64, 65: m128n128, 512: m128n192, 2048: m128n256}", f"schedule: {schedule}",
                       1)
    assert cut != text
    (tmp_path / "contract.yaml").write_text(f"include: [{ROOT / 'kernels'}, {ROOT / 'controls'}]\n" + cut)
    (tmp_path / "kernels").symlink_to(ROOT / "kernels")  # links into folders `include:` names
    (tmp_path / "controls").symlink_to(ROOT / "controls")
    with pytest.raises(ContractError, match=why):
        load_contract(str(tmp_path / "contract.yaml"), import_kernels=False)


def test_the_schedule_picks_the_largest_edge_not_above_the_rows():
    from kcontract.families.matmul.spec import MatmulSpec

    spec = MatmulSpec(schedule={1: "small", 100: "mid", 1000: "big"},
                      cases=[{"name": "c", "m": 1, "k": 64, "n": 8}])
    assert [spec.role(m) for m in (1, 99, 100, 999, 1000, 16384)] == ["small", "small", "mid", "mid", "big", "big"]
    assert MatmulSpec(cases=[{"name": "c", "m": 1, "k": 64, "n": 8}]).role(4096) == "matmul"


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
