"""Run one job in the current process: unpickle its contract, build the gate context, run its gates; the job
carries its kernel's build, so nothing here compiles.

Workers are reused across tasks, so in a worker each task starts from fresh user code: the modules imported
from the contract's folder and project (Python kernels, families, their helpers) are dropped and imported
again, and module state of one task's kernel never reaches the next. In process (KCONTRACT_IN_PROCESS=1, for
debugging) the host's modules are left alone, so tasks share them. CUDA kernels keep no state between tasks: each
task loads its cubin anew and frees its device memory.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

import kcontract
from kcontract.contract.imports import add_import_roots, import_roots
from kcontract.errors import EnvironmentProblem, KContractError
from kcontract.gates import run_gate
from kcontract.gates.base import GateResult
from kcontract.gates.context import GateContext
from kcontract.launch import launcher_for
from kcontract.launch.base import KernelFailure
from kcontract.capacity import limit_gpu_pool, out_of_memory
from kcontract.profiling import host_peak_bytes, measuring, tracking_gpu_live
from kcontract.refcache import ReferenceCache, reference_root
from kcontract.runner.job import Job
from kcontract.usercode import ESCAPES, describe, from_user_code
from kcontract.verdict.outcome import OUT_OF_MEMORY, Outcome, Progress

_PACKAGE = Path(kcontract.__file__).resolve().parent


def user_modules(contract_path: str) -> list[str]:
    """Names of loaded modules whose files lie under the contract's import roots (not kcontract's own)."""
    roots = tuple(os.path.join(str(r.resolve()), "") for r in import_roots(contract_path))
    found = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        path = _user_file(file) if file else None
        if path is not None and path.startswith(roots):
            found.append(name)
    return found


@functools.lru_cache(maxsize=None)
def _user_file(file: str) -> str | None:
    """A module file's real path, unless it is kcontract's own or an installed package's; resolved once per worker
    (modules imported afresh keep their files)."""
    path = Path(file).resolve()
    return None if _PACKAGE in path.parents or "site-packages" in path.parts else str(path)


def fresh_contract(job: Job, fresh: bool):
    """The job's contract; with `fresh`, its user modules dropped first, so unpickling imports them anew."""
    for name in user_modules(job.task.contract_path) if fresh else []:
        del sys.modules[name]
    add_import_roots(job.task.contract_path)
    return job.loaded()


def execute(job: Job, report: Callable[[Progress], None] = lambda p: None, fresh: bool = False) -> Outcome:
    """Run the job's gates (`fresh`: from freshly imported user modules, as workers do); a kernel's failure or an
    exception becomes an 'error' outcome with one line."""
    start = time.perf_counter()
    task = job.task
    outcome = Outcome(task)
    limit_gpu_pool(task.device_bytes)
    try:
        loaded = fresh_contract(job, fresh)
        entry = loaded.entry(task.entry)
        kernel = entry.kernel if task.kind == "entry" else loaded.control(task.name).kernel
        family = entry.fresh_family(task.seed)
        job.check()
        family.exports = job.exports
        family.store = ReferenceCache(reference_root(task.contract_path), enabled=task.cache)
        ctx = GateContext(loaded, entry, family, kernel, task.seed, task.contract_path, task.case,
                          control=task.name if task.kind == "control" else None,
                          make_launcher=lambda: launcher_for(kernel, loaded, entry, job.build, task.interpret),
                          progress=lambda gate, case: report(Progress(task, gate, case)),
                          references=family.store, strict_records=task.strict_records, build=job.build)
        control = loaded.control(task.name) if task.kind == "control" else None
        trials, planted = (control.trials, control.gate) if control is not None else (1, None)
        try:
            with tracking_gpu_live():
                for gate in task.gates:
                    result = _until_red(gate, ctx, trials, faults_are_red=gate == planted)
                    outcome.gates[gate] = result
                    report(Progress(task, gate, None, result))
                    if result.facts.get("faulted"):
                        outcome.fatal = True  # the context is lost: the worker ends, and its task with it
                        break
        finally:
            if ctx._launcher is not None:
                _release(ctx._launcher, outcome)
    except KernelFailure as failure:
        outcome.status, outcome.detail, outcome.trace, outcome.fatal = "error", failure.message, failure.trace, \
            failure.fatal
        if failure.out_of_memory:
            outcome.status = OUT_OF_MEMORY
    except EnvironmentProblem as problem:
        outcome.status, outcome.detail = "environment", problem.message
    except KContractError as error:
        outcome.status, outcome.detail = "error", error.message
    except Exception as exc:  # a bug in a family or in kcontract: report it by name, keep the run going
        outcome.status = OUT_OF_MEMORY if out_of_memory(exc) else "error"
        outcome.detail = f"{type(exc).__name__}: {exc}"
        outcome.trace = traceback.format_exc()
    except ESCAPES as exc:  # user code (a family, an unpickled module) that exits: an error, never a pass
        if not from_user_code(exc):
            raise
        outcome.status, outcome.detail = "error", f"{type(exc).__name__} from user code: {describe(exc)}; the task " \
                                                  f"did not finish its gates"
        outcome.trace = traceback.format_exc()
    outcome.seconds = time.perf_counter() - start
    return outcome


def _until_red(gate: int, ctx: GateContext, trials: int, faults_are_red: bool = False):
    """The gate's result, run up to `trials` times until it goes red (a planted race need not show every time);
    with `faults_are_red` (a control's planted gate), a launch of its kernel that faults the GPU is red there."""
    began = time.perf_counter()
    with measuring() as clock:
        for trial in range(1, trials + 1):
            try:
                result = run_gate(gate, ctx)
            except KernelFailure as failure:
                if not (faults_are_red and failure.fatal):
                    raise
                result = GateResult(gate=gate, passed=False, message=f"its kernel faulted the GPU: {failure.message}",
                                    facts={"faulted": True})
            if not result.passed or result.skipped:
                break
    result.seconds = time.perf_counter() - began
    result.profile = clock.summary(result.seconds, host_peak_bytes())
    if trials > 1:
        result.facts["trials"] = f"{trial} of {trials}"
    return result


def _release(launcher, outcome: Outcome) -> None:
    """Note which kernel ran and free its device memory; a faulted context cannot be freed and does not matter."""
    outcome.kernel = getattr(launcher, "provenance", dict)()
    try:
        getattr(launcher, "close", lambda: None)()
    except Exception:  # the worker ends after a fatal fault anyway
        pass
