"""`run --shard I/N` and `receipt merge`: shards of the CPU contract merge into the whole run's receipt; the split
is deterministic and balanced; merges refuse what is not one run; `receipt check` wants merged receipts."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.receipts.judge import judge_rows
from kcontract.receipts.receipt import Receipt
from kcontract.receipts.schema import KIND
from kcontract.receipts.write import run_receipt
from kcontract.session.plan import Selection, plan_tasks
from tests.helpers.cli import kcontract_in_process
from tests.helpers.receipts import passing_document
from kcontract.session.shard import (
    Shard,
    assign,
    recorded_seconds,
    shard_tasks,
    unit_costs,
)

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "tests" / "contracts" / "cpu.yaml"
FIELDS = ("passed", "checked", "decided", "bit_equal", "within", "failures")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def receipts(tmp_path_factory, cpu_contract_run) -> dict[str, Path]:
    """The whole run of the CPU contract (the session's), its two shards (warm from it), each with a receipt, and
    their merge."""
    folder = tmp_path_factory.mktemp("shards")
    paths = {name: folder / f"{name}.json" for name in ("a", "b", "merged")} | {"whole": cpu_contract_run.receipt}
    whole = cpu_contract_run.proc
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-2000:]
    for name, extra in (("a", ("--shard", "1/2")), ("b", ("--shard", "2/2"))):
        done = kcontract_in_process("run", "--contract", str(CPU), "--jobs", "2", "--receipt", str(paths[name]),
                                    *extra)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    done = invoke("receipt", "merge", "--contract", str(CPU), str(paths["a"]), str(paths["b"]), "-o",
                  str(paths["merged"]))
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [f"merged 2 shards on cpu into {paths['merged']}",
                                        json.loads(paths["whole"].read_text())["summary"]]
    return paths


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def gates(outcome: dict) -> tuple:
    return (outcome["task"]["name"], outcome["status"],
            {g: tuple(r[f] for f in FIELDS) for g, r in sorted(outcome["gates"].items())})


def test_merged_shards_equal_the_whole_run(receipts):
    whole, merged = read(receipts["whole"]), read(receipts["merged"])
    assert [gates(e) for e in merged["entries"]] == [gates(e) for e in whole["entries"]]
    assert [gates(c) for c in merged["controls"]] == [gates(c) for c in whole["controls"]]
    for key in ("summary", "exit_code", "counts", "planted", "contract", "seed", "notes", "device"):
        assert merged[key] == whole[key], key
    assert [e["depends"] for e in merged["entries"]] == [e["depends"] for e in whole["entries"]]
    assert merged["covers"] == {**whole["covers"], "shards": 2}
    shards = [read(receipts["a"]), read(receipts["b"])]
    assert merged["wall_s"] == max(s["wall_s"] for s in shards)
    assert [s["shard"] for s in merged["shards"]] == ["1/2", "2/2"]
    assert [s["wall_s"] for s in merged["shards"]] == [s["wall_s"] for s in shards]
    shown = invoke("receipt", "show", str(receipts["merged"]))
    assert shown.exit_code == 0 and "Merged from 2 shards" in shown.output and whole["summary"] in shown.output


def test_shard_receipts_cover_disjoint_shares_of_the_whole_contract(receipts):
    a, b = read(receipts["a"]), read(receipts["b"])
    assert a["covers"]["shard"] == "1/2" and a["covers"]["partial"] is True
    assert a["covers"]["entries"] == 5 and a["covers"]["controls"] == 20
    assert a["covers"]["split"] == b["covers"]["split"]
    for kind in ("entries", "controls"):
        names = [a["covers"]["covered"][kind], b["covers"]["covered"][kind]]
        assert [[o["task"]["name"] for o in r[kind]] for r in (a, b)] == names
        assert not set(names[0]) & set(names[1])
        assert sorted(names[0] + names[1]) == sorted(n for n, _ in a["covers"]["split"][kind])


def copied_contract(tmp_path: Path) -> Path:
    """cpu.yaml in a folder of its own (receipts are judged beside their contract)."""
    shutil.copy(CPU, tmp_path / "cpu.yaml")
    (tmp_path / "receipts").mkdir()
    return tmp_path / "cpu.yaml"


def test_receipt_check_takes_a_merged_receipt_and_refuses_a_lone_shard(receipts, tmp_path):
    judged = judge_rows(load_contract(str(CPU), import_kernels=False), Receipt.read(receipts["merged"]))
    assert len(judged) == 25 and {j.state for j in judged} == {"current"}
    contract = copied_contract(tmp_path)
    shutil.copy(receipts["a"], tmp_path / "receipts" / "cpu-shard1.json")
    done = invoke("receipt", "check", "--contract", str(contract))
    assert done.exit_code == 1
    assert ("FAIL receipts/cpu-shard1.json: invalid: shard 1/2 of cpu.yaml, not the whole contract: merge every "
            "shard's receipt with `kcontract receipt merge A.json B.json ... -o receipts/cpu-{gpu}.json`") \
        in done.output
    assert "receipts: 1 receipt: no rows, 1 invalid" in done.output


@pytest.mark.parametrize("value", ["0/2", "3/2", "x", "1/65"])
def test_bad_shard_values_are_one_line_and_exit_2(value):
    done = invoke("run", "--contract", str(CPU), "--shard", value)
    assert done.exit_code == 2
    assert done.output.splitlines() == [(f"ERROR: --shard {value}: give I/N, shard I of N with 1 <= I <= N <= 64, "
                                         f"e.g. --shard 1/4")]


def test_shard_refuses_selection_options_and_an_empty_shard_passes(tmp_path):
    done = invoke("run", "--contract", str(CPU), "--shard", "1/2", "--gate", "1")
    assert done.exit_code == 2 and "--shard 1/2 splits the whole contract: drop --only" in done.output
    done = invoke("run", "--contract", str(CPU), "--shard", "7/7", "--receipt", str(tmp_path / "e.json"))
    assert done.exit_code == 0, done.output
    assert "SUMMARY 0 kernels: 0 pass gates 1-4, 0 fail" in done.stdout
    assert read(tmp_path / "e.json")["covers"]["covered"] == {"entries": [], "controls": []}


def test_longest_first_assignment_is_deterministic_and_balanced():
    costs = {"a": 10.0, "b": 9.0, "c": 8.0, "d": 3.0, "e": 2.0, "f": 1.0}
    assert assign(costs, 2) == [["a", "d", "e", "f"], ["b", "c"]]
    shuffled = list(costs.items())
    random.Random(1).shuffle(shuffled)
    assert assign(dict(shuffled), 2) == assign(costs, 2)
    assert assign({"z": 1.0, "y": 1.0, "x": 1.0}, 2) == [["x", "z"], ["y"]]  # ties by name, then shard number
    assert assign(costs, 8)[6:] == [[], []]
    many = {f"u{i}": float((i * 37) % 23 + 1) for i in range(40)}
    for n in (1, 3, 7):
        shards = assign(many, n)
        assert sorted(u for s in shards for u in s) == sorted(many)
        loads = [sum(many[u] for u in s) for s in shards]
        assert max(loads) - min(loads) <= max(many.values())


def test_units_cost_their_recorded_seconds_and_scale_the_planner_weight_where_none():
    loaded = load_contract(str(CPU), import_kernels=False)
    tasks = plan_tasks(loaded, str(CPU), Selection())
    pieces = {(t.kind, t.name): t.entry for t in tasks}
    recorded = {key: 1.0 for key in pieces}
    costs = unit_costs(loaded, tasks, recorded)
    assert costs == {e.name: float(sum(1 for u in pieces.values() if u == e.name)) for e in loaded.entries}
    one = ("entry", "np_decode_d256_g3")
    guessed = unit_costs(loaded, tasks, {k: v for k, v in recorded.items() if k != one})
    assert guessed["np_decode_d256_g3"] != costs["np_decode_d256_g3"] and guessed["np_decode_d256_g3"] > 1.0
    assert {k: v for k, v in guessed.items() if k != "np_decode_d256_g3"} == \
        {k: v for k, v in costs.items() if k != "np_decode_d256_g3"}
    for n in (1, 2, 3, 7):
        shares = [shard_tasks(loaded, tasks, Shard(i, n)).tasks for i in range(1, n + 1)]
        assert sorted((t.kind, t.name, tuple(t.gates)) for s in shares for t in s) == \
            sorted((t.kind, t.name, tuple(t.gates)) for t in tasks)
        assert all(len({t.entry for t in s} & {t.entry for t in r}) == 0 for s in shares for r in shares if s is not r)


def test_recorded_seconds_come_from_the_newest_whole_receipt(tmp_path):
    contract = copied_contract(tmp_path)
    loaded = load_contract(str(contract), import_kernels=False)
    assert recorded_seconds(loaded) == ({}, None)

    def write(name: str, created: str, seconds: float, covers: dict) -> None:
        receipt = {"kind": KIND, "contract": "cpu.yaml", "created": created, "covers": covers,
                   "entries": [{"task": {"name": "np_decode_d128_g4"}, "seconds": seconds}],
                   "controls": [{"task": {"name": "np_truncated_output"}, "seconds": seconds / 10}]}
        (tmp_path / "receipts" / name).write_text(json.dumps(receipt))

    write("cpu-old.json", "2026-01-01T00:00:00+00:00", 5.0, {"partial": False})
    write("cpu-new.json", "2026-02-01T00:00:00+00:00", 7.0, {"partial": False})
    write("cpu-shard.json", "2026-03-01T00:00:00+00:00", 9.0, {"partial": True, "shard": "1/2"})
    assert recorded_seconds(loaded) == ({("entry", "np_decode_d128_g4"): 7.0,
                                         ("control", "np_truncated_output"): 0.7}, "receipts/cpu-new.json")


def shard_receipt(index: int, count: int = 2, **changes) -> dict:
    """A made-up shard receipt of the CPU contract: its entries alternate between two shards, each with the
    controls planted on it; every entry passes and every control is red."""
    loaded = load_contract(str(CPU), import_kernels=False)
    number = {e.name: i % 2 + 1 for i, e in enumerate(loaded.entries)}
    split = {"entries": [[e.name, number[e.name]] for e in loaded.entries],
             "controls": [[c.name, number[c.entry]] for c in loaded.controls]}
    document = passing_document(loaded)
    mine = {k: [row for row in document[k] if number[row["task"]["entry"]] == index] for k in ("entries", "controls")}
    covers = {"shard": f"{index}/{count}", "split": split,
              "covered": {k: [row["task"]["name"] for row in v] for k, v in mine.items()}}
    receipt = run_receipt(loaded, {**document, **mine}, None, mode=f"shard {index}/{count}", seed=loaded.seed,
                          wall_s=float(index), gpu=False, keep_rows=False, covers=covers).to_dict()
    receipt["git"] = {"commit": "0" * 40, "dirty": False}
    for key, value in changes.items():
        receipt[key] = value
    return receipt


def merge(tmp_path: Path, *receipts, output: str = "m.json"):
    paths = []
    for i, receipt in enumerate(receipts):
        paths.append(tmp_path / f"s{i}.json")
        paths[-1].write_text(receipt if isinstance(receipt, str) else json.dumps(receipt))
    return invoke("receipt", "merge", "--contract", str(CPU), *map(str, paths), "-o", str(tmp_path / output))


@pytest.mark.parametrize("receipts, why", [
    ((shard_receipt(1), shard_receipt(1)), "s0.json and {t}/s1.json are both shard 1/2 on cpu: give each shard's"),
    ((shard_receipt(1),), "shard 2 of 2 on cpu missing (np_decode_d512_g16, np_prompt_d256_g2_sliding, "),
    ((shard_receipt(1), shard_receipt(2, seed=8)), "s0.json and {t}/s1.json differ in seed (20261130 vs 8)"),
    ((shard_receipt(1), shard_receipt(2, git={"commit": "1" * 40})), "differ in commit"),
    ((shard_receipt(1), shard_receipt(2, contract="other.yaml")), "differ in contract (cpu.yaml vs other.yaml)"),
    ((shard_receipt(1), shard_receipt(2, format=None)), "s1.json: a shard receipt of the earlier whole-contract form"),
    ((shard_receipt(1), "hello"), "s1.json: not valid JSON (Expecting value: line 1 column 1 (char 0)); give the "
                                  "receipts"),
    ((shard_receipt(1), {"kind": "other"}), "s1.json: not a kcontract receipt (no \"kind\": \"kcontract-run\")"),
    ((shard_receipt(1), shard_receipt(2, 3)), "are shards of different splits (shard 1/2 and 2/3)"),
])
def test_merge_refuses_what_is_not_one_whole_run(tmp_path, receipts, why):
    done = merge(tmp_path, *receipts)
    assert done.exit_code == 2
    lines = done.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: ") and why.format(t=tmp_path) in lines[0], done.output
    assert not (tmp_path / "m.json").exists()


def test_merge_keeps_gpu_kinds_apart_and_recounts_the_summary(tmp_path):
    failing = shard_receipt(2, environment={"gpu": "NVIDIA L4"}, device="gpu")
    failing["entries"][0]["gates"]["2"]["passed"] = False
    kinds = [shard_receipt(1, environment={"gpu": g}, device="gpu") for g in ("NVIDIA H200", "NVIDIA L4")]
    done = merge(tmp_path, kinds[0], shard_receipt(2, environment={"gpu": "NVIDIA H200"}, device="gpu"), kinds[1],
                 failing)
    assert done.exit_code == 2 and "put {gpu} in the name" in done.output
    done = merge(tmp_path, kinds[0], shard_receipt(2, environment={"gpu": "NVIDIA H200"}, device="gpu"), kinds[1],
                 failing, output="m-{gpu}.json")
    assert done.exit_code == 1, done.output
    h200, l4 = read(tmp_path / "m-h200.json"), read(tmp_path / "m-l4.json")
    assert h200["summary"] == ("SUMMARY 5 kernels: 5 pass gates 1-4, 0 fail, 0 known findings; 20 controls: 20 red "
                               "as planted, 0 missed; 0 limit problems") and h200["exit_code"] == 0
    assert l4["summary"].startswith("SUMMARY 5 kernels: 4 pass gates 1-4, 1 fail") and l4["exit_code"] == 1
    assert l4["counts"]["failing_entries"] == ["np_decode_d512_g16"] and l4["covers"]["partial"] is False
    names = [e.name for e in load_contract(str(CPU), import_kernels=False).entries]
    assert [e["task"]["name"] for e in h200["entries"]] == names
