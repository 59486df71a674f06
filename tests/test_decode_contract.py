"""The repository's decode contract on a CPU: its refusals, its launch records through `run --gate 5`, its kernels."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kcontract.contract.loader import load_contract
from kcontract.errors import ContractError
from tests.helpers.cli import kcontract_in_process

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "contract.yaml"
ODD_CASE = "{name: linear_8192, cache: {kind: linear, length: 8192}, rows: [8191, 3000, 511, 256, 255, 0]}"


def variant(tmp_path: Path, old: str, new: str) -> Path:
    """The repository contract with one edit, beside a copy of its kernels and controls."""
    text = CONTRACT.read_text()
    assert text.count(old) == 1, old
    for folder in ("kernels", "controls"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    path = tmp_path / "contract.yaml"
    path.write_text(text.replace(old, new))
    return path


def test_a_windowed_ring_at_head_dim_512_is_refused_by_name(tmp_path):
    path = variant(tmp_path, ODD_CASE, "{name: ring_w1024, cache: {kind: ring, window: 1024, ring: 1100}, rows: [3000]}")
    with pytest.raises(ContractError) as caught:
        load_contract(str(path))
    message = caught.value.message
    assert re.search(r"contract\.yaml:\d+: entries\[2\]\.cases\[0\]: chunk 256, group 5, head_dim 512, window ring "
                     r"is not an instance of kernels/window_decode\.cu", message), message
    assert "it is refused, not run untested" in message


def test_an_unsupported_head_dim_is_refused_by_name(tmp_path):
    path = variant(tmp_path, "shape: {head_dim: 128, q_heads: 32, kv_heads: 8}\n    arithmetic: *mma\n    stress: "
                             "{chunks: 130",
                   "shape: {head_dim: 96, q_heads: 32, kv_heads: 8}\n    arithmetic: *mma\n    stress: {chunks: 130")
    with pytest.raises(ContractError, match="group 4, head_dim 96, window none is not an instance of kernels/window_decode.cu"):
        load_contract(str(path))


def test_every_symbol_is_filled_from_the_shape():
    loaded = load_contract(str(CONTRACT))
    for entry in loaded.entries:
        if not entry.family.name.startswith("attention."):  # a family whose symbols name no shape
            continue
        shape, symbols = entry.family.spec.shape, entry.kernel.cuda.symbols
        head = f"<{shape.head_dim}, {shape.q_heads // shape.kv_heads}"
        if entry.family.name == "attention.prompt":  # partials<D, G, PB> or attend<D, G, PB>: PB 1 for bf16 P
            pb = 1 if entry.family.spec.arithmetic.prob_round == "bf16" else 0
            if entry.family.spec.abi == "fused":
                assert list(symbols) == ["attend"] and symbols["attend"].endswith(f"{head}, {pb}>"), entry.name
            else:
                assert symbols["partials"].endswith(f"{head}, {pb}>") and symbols["merge"].endswith(f"{head}>"), entry.name
        else:
            assert all(symbol.endswith(f"{head}>") for symbol in symbols.values()), entry.name


def test_launch_records_run_as_gate_5_without_a_gpu(repository_checked):
    proc = kcontract_in_process("run", "--gate", "5", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loaded = load_contract(str(CONTRACT))
    for entry in loaded.entries:  # every symbol on every target SM
        rows = len(entry.kernel.compiled.symbols) * len(loaded.targets)
        assert re.search(rf"^{entry.name} gate 5 launch records: pass, {rows} symbol x SM rows, 0 failures",
                         proc.stdout, re.M), entry.name
    assert "2 controls: 2 red as planted, 0 missed; 0 limit problems" in proc.stdout
