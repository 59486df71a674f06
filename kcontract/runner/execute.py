"""Run one task in the current process: load the contract, build the launcher, run its gates."""

from __future__ import annotations

import time
import traceback

from kcontract.contract.loader import load_contract
from kcontract.gates import GATES
from kcontract.gates.context import GateContext
from kcontract.launch import launcher_for
from kcontract.runner.outcome import Outcome, Task

_CONTRACTS: dict[str, object] = {}


def execute(task: Task) -> Outcome:
    """Run the task's gates; a Python exception from the kernel or family becomes an 'error' outcome."""
    start = time.perf_counter()
    outcome = Outcome(task)
    try:
        loaded = _CONTRACTS.get(task.contract_path) or load_contract(task.contract_path)
        _CONTRACTS[task.contract_path] = loaded
        entry = loaded.entry(task.entry)
        kernel = entry.kernel
        if task.kind == "control":
            kernel = next(c for c in loaded.controls if c.name == task.name).kernel
        family = type(entry.family)(entry.name, entry.family.spec, task.seed)
        ctx = GateContext(entry=entry.name, family=family, launcher=launcher_for(kernel, family), seed=task.seed,
                          contract_path=task.contract_path, case=task.case,
                          control=task.name if task.kind == "control" else None)
        for gate in task.gates:
            began = time.perf_counter()
            outcome.gates[gate] = GATES[gate].run(ctx)
            outcome.gates[gate].seconds = time.perf_counter() - began
    except Exception as exc:  # the kernel or family raised: report it by name, keep the run going
        outcome.status = "error"
        outcome.detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    outcome.seconds = time.perf_counter() - start
    return outcome
