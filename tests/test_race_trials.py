"""A control that plants a race declares `trials`: its gate runs again until it goes red, since a race need not
show on the first launch. The CPU double truncates its output only on inputs it has launched on before."""

from __future__ import annotations

import json

import pytest

from kcontract.contract.loader import load_contract
from kcontract.errors import KContractError
from tests.helpers.cli import ROOT, kcontract, no_traceback

CONTRACT = """version: 1
seed: 1
entries:
  - name: np_decode_d128_g4
    family: attention.decode
    kernel: {python: "tests.doubles.decode:window_decode"}
    shape: {head_dim: 128, q_heads: 8, kv_heads: 2}
    arithmetic: {chunk: 256, exp: expf, prob_round: none, div: ieee, out: bf16}
    cases:
      - {name: linear_3000, cache: {kind: linear, length: 3000}, rows: [2999, 1500, 255, 0, 700]}
controls:
  - {name: np_race, entry: np_decode_d128_g4, gate: 1, kernel: {python: "tests.doubles.controls:race_on_repeat"},
     fault: "the output truncated on a repeated launch", trials: TRIALS}
"""


def _run(tmp_path, trials: int):
    contract = tmp_path / "race.yaml"
    contract.write_text(CONTRACT.replace("TRIALS", str(trials)))
    report = tmp_path / "run.json"
    done = kcontract("run", "--contract", str(contract), "--gate", "1", "--jobs", "1", "--json", str(report),
                     env={"PYTHONPATH": str(ROOT), "KCONTRACT_CACHE": str(tmp_path / "cache")})
    no_traceback(done)
    return done, json.loads(report.read_text())["controls"][0]["gates"]["1"]


def test_a_race_missed_on_one_trial_is_red_on_the_second_of_three(tmp_path):
    once, gate = _run(tmp_path, 1)
    assert once.returncode == 1 and gate["passed"] and "1 missed" in once.stdout
    thrice, gate = _run(tmp_path, 3)
    assert thrice.returncode == 0, thrice.stdout[-2000:]
    assert not gate["passed"] and gate["failures"] > 100 and gate["facts"]["trials"] == "2 of 3"
    assert "red as planted at gate 1 (on trial 2 of 3)" in " ".join((thrice.stdout + thrice.stderr).split())


@pytest.mark.parametrize("trials", ["0", "1001", "many"])
def test_trials_out_of_range_is_refused_with_its_place(tmp_path, trials):
    contract = tmp_path / "race.yaml"
    contract.write_text(CONTRACT.replace("TRIALS", trials))
    with pytest.raises(KContractError, match=r"race\.yaml:\d+.*trials"):
        load_contract(str(contract))
