"""The Python launcher: a worker's launchers share the filled host buffers of assembled inputs, so a task after
another fills and faults in a cache's memory only where no earlier task left a buffer big enough."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kcontract.contract.loader import load_contract
from kcontract.gatetable import Suite
from kcontract.launch import python as python_launch
from kcontract.launch.python import PythonLauncher, worker_buffers
from kcontract.problem import Assembled

ROOT = Path(__file__).resolve().parents[1]


def test_launchers_of_one_worker_fill_an_assembled_cache_once(monkeypatch):
    loaded = load_contract(str(ROOT / "tests" / "contracts" / "cpu.yaml"))
    entry = loaded.entry("np_decode_d128_g4")
    problem = entry.family.checks(Suite.REALISTIC, "ring_w512")[0].problem
    assembled = [value for value in problem.inputs.values() if isinstance(value, Assembled)]
    assert assembled, "the decode double's caches are assembled inputs"
    worker_buffers.cache_clear()
    fills = []
    real = np.full
    monkeypatch.setattr(python_launch.np, "full", lambda shape, *a, **k: fills.append(shape) or real(shape, *a, **k))
    first = PythonLauncher(entry.kernel.python).run(problem)
    filled = len(fills)
    second = PythonLauncher(entry.kernel.python).run(problem)
    assert all(first[name].tobytes() == second[name].tobytes() for name in first)  # the same bits, poison too
    assert len(fills) - filled == len(problem.outputs), fills  # the second task poisons its outputs and fills nothing
    assert filled == len(problem.outputs) + len(assembled), fills
    assert worker_buffers() is worker_buffers()
