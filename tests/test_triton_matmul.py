"""The contract's Triton matmul (kernels/matmul_triton.py on the pointer ABI, K in three pieces): its smallest case
passes gates 1-4 through Triton's interpreter and each of its four controls goes red at its gate; the bench's calls
of it launch what its gates launch, with every argument a buffer or scalar of the call."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kcontract.builds.builds import Builds
from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.gatetable import Suite
from tests.helpers.triton_project import ROOT

pytest.importorskip("triton", reason="Triton is not installed: pip install 'kcontract[triton]'")

ENTRY = "matmul_triton_kv_k4096_n2048"
CONTROLS = (("matmul_triton_split_from_m", 2), ("matmul_triton_merge_order_from_tile", 2),
            ("matmul_triton_k_tail_dropped", 4), ("matmul_triton_bf16_accumulator", 4))


def test_the_triton_matmul_passes_interpreted_and_its_controls_go_red():
    pytest.importorskip("torch", reason="Triton's interpreter runs on torch CPU tensors: pip install torch")
    done = CliRunner().invoke(cli, ["run", "--interpret", "--contract", str(ROOT / "contract.yaml"), "--only", ENTRY,
                                    "--case", "m5_k600_n120"])
    assert done.exit_code == 0, done.output
    assert "1 pass gates 1-4 (case m5_k600_n120) in Triton's interpreter (numpy's bits, not a GPU's)" in done.output, \
        done.output
    assert "4 controls: 4 red as planted, 0 missed" in done.output, done.output
    for name, gate in CONTROLS:
        assert f"control {name} (for {ENTRY}): red as planted at gate {gate}" in done.output, done.output


def test_the_bench_launches_the_triton_matmul_as_its_gates_do():
    """Every bench call launches the one symbol on a, b, out, m, n, k over the tiles, as a gate's call does."""
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    entry = loaded.entry(ENTRY)
    family = entry.fresh_family(loaded.model.seed)
    family.exports = Builds.of(loaded).family_exports(entry.kernel.compiled, family)
    assert family.exports == {"tile_k": 64, "tiles_tile_m": 64, "tiles_tile_n": 64}
    calls = family.bench_calls(type(family).bench_sizes)
    shapes = {(c.k, c.n) for c in family.spec.cases}
    assert len(calls) == len(shapes) * len(type(family).bench_sizes["rows"])
    for call in calls:
        m, k, n = (call.size[name] for name in ("rows", "k", "n"))
        (launch,) = call.launches
        assert (launch.role, launch.grid, launch.args, launch.tensor_maps) == (
            "tiles", (-(-n // 64), -(-m // 64), 1), ("a", "b", "out", "m", "n", "k"), {}), call.label
        assert set(launch.args) <= {*call.random_inputs, *call.outputs, *call.scalars}, call.label
        assert call.bound == "compute" and call.mma_flops >= call.flops == 2 * m * n * k, call.label
        assert call.peer is not None
    for case in family.spec.cases:
        problem = family.checks(Suite.REALISTIC, case.name)[0].problem
        (call,) = (c for c in family.bench_calls({"rows": (case.m,)}) if (c.size["k"], c.size["n"]) == (case.k, case.n))
        assert call.launches == problem.launches, case.name
