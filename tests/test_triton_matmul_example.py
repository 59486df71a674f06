"""examples/triton_matmul: a Triton matmul on the matmul family's pointer ABI, its split of K fixed by K alone,
passes gates 1-4 through Triton's interpreter and its launch records hold; each of its four controls goes red at
its gate."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from tests.helpers.triton_project import ROOT

pytest.importorskip("triton", reason="Triton is not installed: pip install 'kcontract[triton]'")
pytest.importorskip("torch", reason="Triton's interpreter runs on torch CPU tensors: pip install torch")


def test_the_example_triton_matmul_passes_interpreted_and_its_controls_go_red(tmp_path):
    shutil.copytree(ROOT / "examples" / "triton_matmul", tmp_path / "example")
    done = CliRunner().invoke(cli, ["run", "--interpret", "--contract", str(tmp_path / "example" / "contract.yaml")])
    assert done.exit_code == 0, done.output
    assert "1 pass gates 1-4 in Triton's interpreter (numpy's bits, not a GPU's)" in done.output, done.output
    assert "4 controls: 4 red as planted, 0 missed" in done.output, done.output
    assert "gate 5 launch records: pass, 7 symbol x SM rows" in done.output, done.output
    for name, gate in (("split_from_m", 2), ("merge_order_from_tile", 2), ("k_tail_dropped", 4),
                       ("bf16_accumulator", 4)):
        assert f"control {name} (for matmul_triton_k600_n120): red as planted at gate {gate}" in done.output
