"""Workers share the GPU by bytes: each task starts once its largest case's device bytes fit beside the running
ones (one always runs), sized from the family's case_bytes and case_buffer_bytes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from kcontract.contract.loader import load_contract
from kcontract.runner.budget import WORKER_DEVICE_FLOOR, DeviceBudget, device_budget
from kcontract.session.plan import Selection, device_bytes, plan_tasks
from tests.helpers.cli import kcontract
from tests.helpers.exits import out_of_memory_project

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30


def test_tasks_carry_their_largest_cases_device_bytes():
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    tasks = plan_tasks(loaded, "contract.yaml", Selection())
    by_entry = {t.entry: t.device_bytes for t in tasks}
    decode = loaded.entry("decode_d512_g16")
    family = decode.family
    assert by_entry["decode_d512_g16"] == device_bytes(decode) == max(
        family.case_bytes(c) + family.case_buffer_bytes(c) + family.reference_device_bytes(c)
        for c in ("linear_262144", "linear_20000"))
    assert by_entry["decode_d512_g16"] > 16 * GIB > 4 * by_entry["matmul_qkv_k4096_n6144"]
    control = next(t for t in tasks if t.kind == "control" and t.entry == "decode_d512_g16")
    assert control.device_bytes == by_entry["decode_d512_g16"]


def test_a_task_waits_until_its_bytes_fit_and_one_always_runs():
    budget, stopped, order = DeviceBudget(10 * GIB), threading.Event(), []
    assert budget.take(8 * GIB, stopped)
    waiting = threading.Thread(target=lambda: order.append(budget.take(4 * GIB, stopped)))
    waiting.start()
    time.sleep(0.3)
    assert order == [] and budget.in_use == 8 * GIB  # 8 + 4 does not fit in 10
    budget.give(8 * GIB)
    waiting.join(2)
    assert order == [True] and budget.in_use == 4 * GIB
    budget.give(4 * GIB)
    assert budget.take(30 * GIB, stopped) and budget.in_use == 30 * GIB  # larger than all: runs alone


def test_a_stopped_run_ends_the_wait_and_no_gpu_means_no_limit():
    budget, stopped = DeviceBudget(10 * GIB), threading.Event()
    budget.take(9 * GIB, stopped)
    stopped.set()
    assert budget.take(2 * GIB, stopped) is False
    tasks = [type("T", (), {"device_bytes": 5 * GIB})()]
    assert device_budget(tasks, 4, 0).total == 0
    assert device_budget(tasks, 4, 100 * GIB).total == 100 * GIB - 4 * WORKER_DEVICE_FLOOR
    free = DeviceBudget(0)
    assert free.take(10**15, stopped) and free.in_use == 0


def test_a_task_out_of_memory_beside_others_runs_again_alone_before_anything_is_judged(tmp_path):
    out_of_memory_project(tmp_path)
    report = tmp_path / "run.json"
    done = kcontract("run", "--gate", "1", "--jobs", "2", "--json", str(report), cwd=tmp_path,
                     env={"KCONTRACT_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout + done.stderr
    entries = json.loads(report.read_text())["entries"]
    assert [e["status"] for e in entries] == ["ran", "ran"]
    assert sum("ran alone after running out of device memory" in e["detail"] for e in entries) == 1
    assert "out of memory" not in done.stdout


def test_a_whole_run_on_a_fake_80_gb_card_never_holds_more_than_the_card(monkeypatch):
    from kcontract.session import workers

    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    tasks = plan_tasks(loaded, "contract.yaml", Selection())
    free = int(78.7 * GIB)
    monkeypatch.setattr(workers, "free_gpu_memory", lambda: free)
    monkeypatch.setattr(workers, "usable_cores", lambda: 16)
    monkeypatch.setattr(workers, "physical_memory", lambda: 128 * GIB)
    jobs, _ = workers.auto_jobs(loaded, gpu=True)
    budget = device_budget(tasks, jobs, free)
    held, peak, lock = [0], [0], threading.Lock()

    def worker(mine: list) -> None:  # a task's pool is capped at its device bytes: it holds at most those
        for task in mine:
            assert budget.take(task.device_bytes, threading.Event())
            with lock:
                held[0] += task.device_bytes
                peak[0] = max(peak[0], held[0])
            time.sleep(0.001)
            with lock:
                held[0] -= task.device_bytes
            budget.give(task.device_bytes)

    threads = [threading.Thread(target=worker, args=(tasks[i::jobs],)) for i in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    largest = max(t.device_bytes for t in tasks)
    assert jobs == 16 and peak[0] + jobs * WORKER_DEVICE_FLOOR <= max(free, largest + jobs * WORKER_DEVICE_FLOOR)
