"""A task declares the device bytes its gates held at most in the newest receipt (live bytes counted by CuPy's
memory hooks), with room; gates no receipt measured keep the family's estimate."""

from __future__ import annotations

from pathlib import Path

from kcontract.contract.loader import load_contract
from kcontract.profiling import MB, measuring, tracking_gpu_live
from kcontract.refcache import holds_any
from kcontract.receipts.durations import gate_live_bytes, gate_seconds
from kcontract.receipts.receipt import Receipt
from kcontract.receipts.rows import computed_nothing, with_cold_measures
from kcontract.session.plan import HELD_ROOM, HELD_SLACK, Selection, declared_as_held, plan_tasks
from tests.helpers.fake_cupy import memory_hooks

ROOT = Path(__file__).resolve().parent.parent


def test_live_bytes_count_blocks_in_use_not_what_the_pool_caches(monkeypatch):
    entered = memory_hooks(monkeypatch, used=100 * MB)  # an earlier task's blocks, not this one's
    with measuring() as clock, tracking_gpu_live():
        (hook,) = entered
        hook.malloc_postprocess(device_id=0, size=300 * MB, mem_size=300 * MB, mem_ptr=1, pmem_id=1)
        hook.free_postprocess(device_id=0, mem_size=300 * MB, mem_ptr=1, pmem_id=1)  # back to the pool's cache
        hook.malloc_postprocess(device_id=0, size=50 * MB, mem_size=50 * MB, mem_ptr=2, pmem_id=2)
        hook.free_postprocess(device_id=0, mem_size=100 * MB, mem_ptr=7, pmem_id=7)  # an earlier task's block
        hook.malloc_postprocess(device_id=0, size=280 * MB, mem_size=280 * MB, mem_ptr=3, pmem_id=3)
        hook.malloc_postprocess(device_id=0, size=9, mem_size=512, mem_ptr=0, pmem_id=0)  # a malloc that failed
    assert entered == []  # the hook is gone after the task
    assert clock.gpu_live == 330 * MB  # 300 at once, then 50 + 280
    assert clock.summary(1.0, 0)["live_gpu_mb"] == 330.0


def test_no_cupy_counts_nothing_and_runs_the_body(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import cupy raises ImportError
    ran = []
    with measuring() as clock, tracking_gpu_live():
        ran.append(True)
    assert ran == [True] and clock.gpu_live == 0


def _receipt(rows: list[dict]) -> Receipt:
    data = {"format": 1, "kind": "run", "entries": [r for r in rows if r["task"]["kind"] == "entry"],
            "controls": [r for r in rows if r["task"]["kind"] == "control"]}
    return Receipt(data)


def _row(kind: str, name: str, device: str, live: dict[int, float]) -> dict:
    return {"task": {"kind": kind, "name": name}, "ran": {"device": device},
            "gates": {str(g): {"seconds": 1.0, "profile": {"live_gpu_mb": mb}} for g, mb in live.items()}}


def test_measured_gates_declare_what_they_held_with_room_and_the_rest_keep_the_estimate():
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    tasks = plan_tasks(loaded, "contract.yaml", Selection(only=("decode_d512_g16",)))
    receipt = _receipt([_row("entry", "decode_d512_g16", "gpu", {1: 2048.0, 5: 0.0}),
                        _row("entry", "decode_d512_g16", "cpu", {3: 99.0})])
    held = gate_live_bytes(receipt, "gpu")
    assert held == {("entry", "decode_d512_g16", 1): 2048 * MB, ("entry", "decode_d512_g16", 5): 0}  # not the CPU's
    declared = {t.gates[0]: t.device_bytes for t in declared_as_held(tasks, held) if t.kind == "entry"}
    estimate = {t.gates[0]: t.device_bytes for t in tasks if t.kind == "entry"}
    assert declared[1] == int(2048 * MB * HELD_ROOM) + HELD_SLACK < estimate[1]
    assert declared[5] == HELD_SLACK  # gate 5 reads records: it holds nothing on the device
    assert all(declared[g] == estimate[g] for g in estimate if g not in (1, 5))


def test_a_task_that_held_more_than_its_estimate_declares_more():
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    tasks = [t for t in plan_tasks(loaded, "contract.yaml", Selection(only=("matmul_down_k16384_n4096",)))
             if t.kind == "entry"]
    huge = {("entry", t.name, g): 40 << 30 for t in tasks for g in t.gates}
    assert all(t.device_bytes > 40 << 30 > before.device_bytes
               for t, before in zip(declared_as_held(tasks, huge), tasks))


COLD = {"inputs": {"hit": 1, "miss": 3}, "references": {"hit": 0, "miss": 4}}
WARM = {"inputs": {"hit": 4, "miss": 0}, "references": {"hit": 4, "miss": 0}}


def _gate(seconds: float, live: float, stores: dict) -> dict:
    return {"seconds": seconds, "profile": {"live_gpu_mb": live, **stores}}


def test_a_warm_gate_plans_by_the_measures_of_the_run_that_computed_its_references():
    cold = {"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
            "gates": {"1": _gate(60.0, 4096.0, COLD), "2": _gate(20.0, 900.0, WARM)}}
    warm = with_cold_measures({"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
                               "gates": {"1": _gate(0.5, 69.0, WARM), "2": _gate(19.0, 880.0, WARM)}}, cold)
    assert warm["gates"]["1"]["cold"] == {"seconds": 60.0, "live_gpu_mb": 4096.0}
    assert "cold" not in warm["gates"]["2"]  # the earlier row was warm too and carried nothing: the estimate holds
    receipt = _receipt([warm])
    assert gate_live_bytes(receipt, "gpu") == {("entry", "a", 1): 4096 * MB}
    assert gate_seconds(receipt, "gpu") == {("entry", "a", 1): 60.0}
    again = with_cold_measures({"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
                                "gates": {"1": _gate(0.4, 70.0, WARM)}}, warm)
    assert again["gates"]["1"]["cold"] == {"seconds": 60.0, "live_gpu_mb": 4096.0}  # carried on through warm runs
    fresh = with_cold_measures({"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
                                "gates": {"1": _gate(40.0, 3000.0, COLD)}}, again)
    assert "cold" not in fresh["gates"]["1"] and gate_live_bytes(_receipt([fresh]), "gpu") == {
        ("entry", "a", 1): 3000 * MB}


def test_a_gate_that_took_nothing_from_a_cache_is_not_warm():
    assert not computed_nothing({"inputs": {"hit": 0, "miss": 0}, "references": {"hit": 0, "miss": 0}})
    assert not computed_nothing({"inputs": {"hit": 0, "off": 2}})
    assert not computed_nothing({})
    assert computed_nothing({"inputs": {"hit": 2, "miss": 0}})


def test_a_warm_cache_plans_by_what_the_gates_took_and_held_last(tmp_path):
    cold = {"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
            "gates": {"1": _gate(60.0, 4096.0, COLD)}}
    warm = with_cold_measures({"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
                               "gates": {"1": _gate(0.5, 69.0, WARM)}}, cold)
    receipt = _receipt([warm])
    assert gate_live_bytes(receipt, "gpu", cold=False) == {("entry", "a", 1): 69 * MB}
    assert gate_seconds(receipt, "gpu", cold=False) == {("entry", "a", 1): 0.5}
    assert gate_seconds(receipt, "gpu") == {("entry", "a", 1): 60.0}  # cold unless told otherwise
    assert not holds_any(tmp_path) and not holds_any(tmp_path / "absent")
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "abc.lock").touch()
    assert not holds_any(tmp_path)  # a lock is no stored object
    (tmp_path / "ab" / "abc.bin").touch()
    assert holds_any(tmp_path)


def test_a_gate_that_took_references_another_gate_made_keeps_its_larger_cold_measure():
    """A cold run where a sibling made the references first measures a gate short of what it takes alone."""
    shared = {"inputs": {"hit": 0, "miss": 4}, "references": {"hit": 4, "miss": 0}}
    alone = {"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
             "gates": {"1": _gate(38.5, 8125.0, COLD)}}
    helped = with_cold_measures({"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
                                 "gates": {"1": _gate(13.7, 1290.0, shared)}}, alone)
    assert helped["gates"]["1"]["cold"] == {"seconds": 38.5, "live_gpu_mb": 8125.0}
    assert gate_seconds(_receipt([helped]), "gpu") == {("entry", "a", 1): 38.5}
    assert gate_seconds(_receipt([helped]), "gpu", cold=False) == {("entry", "a", 1): 13.7}
    slower = with_cold_measures({"task": {"kind": "entry", "name": "a"}, "ran": {"device": "gpu"},
                                 "gates": {"1": _gate(50.0, 9000.0, shared)}}, alone)
    assert "cold" not in slower["gates"]["1"] and gate_seconds(_receipt([slower]), "gpu") == {("entry", "a", 1): 50.0}
