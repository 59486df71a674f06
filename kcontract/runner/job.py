"""A job: a task with what its worker needs, resolved once by the parent. The validated contract travels
pickled, and a worker unpickles it afresh for every job, so the user modules it names (Python kernels, a
project's families) are imported anew (decision 0007) while the YAML is neither read nor validated again; the
exports each entry's family reads of its CUDA kernel travel read, and a CUDA task's kernel travels built (its
cubin per SM, lowered names, resources and launch exports: decision 0039), so no worker compiles or opens a cubin
for anything but loading it."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from kcontract.builds.artifact import KernelBuild
from kcontract.errors import EnvironmentProblem, KContractError
from kcontract.gatetable import launching, records_gate
from kcontract.launch.cuda import target_for
from kcontract.verdict.outcome import Task

RECORDS_GATE = records_gate().number  # compares every target SM's build; the other gates launch the device's


@dataclass(frozen=True)
class Job:
    """One task and its resolved inputs."""

    task: Task
    contract: bytes  # the LoadedContract, pickled
    exports: dict[str, int] | None = None  # the entry family's exports of its CUDA kernel; None: see `problem`
    build: KernelBuild | None = None  # the task's CUDA kernel built for the SMs it needs
    problem: tuple[str, str] | None = None  # ("environment" or "error", why): what kept the kernel from resolving

    def loaded(self):
        """The contract, unpickled: its user modules import afresh where they are not loaded."""
        return pickle.loads(self.contract)

    def check(self) -> None:
        """Raise what kept the task's kernel from being resolved, as the task's outcome will say it."""
        if self.problem is not None:
            kind, message = self.problem
            raise (EnvironmentProblem if kind == "environment" else KContractError)(message)


def task_sms(loaded, task: Task, device_sm: str | None) -> list[str]:
    """The SMs a task's kernel is built for: every target for the records gate, this GPU's for the gates that
    launch (none where no GPU is named)."""
    wanted = set(loaded.targets) if RECORDS_GATE in task.gates else set()
    if device_sm is not None and any(g in launching() for g in task.gates):
        wanted.add(target_for(device_sm, loaded.targets))
    return [sm for sm in loaded.targets if sm in wanted]


def jobs_for(loaded, tasks: list[Task], builds, device_sm: str | None = None) -> list[Job]:
    """A job per task: the contract pickled once, each entry's exports read once, each CUDA task's kernel taken
    from `builds` (kcontract.builds.builds.Builds) for the SMs it needs; a kernel that does not build leaves its
    tasks to say so, as they would have."""
    blob = pickle.dumps(loaded)
    exports: dict[str, tuple] = {}
    for name in dict.fromkeys(t.entry for t in tasks):
        entry = loaded.entry(name)
        exports[name] = _resolved(lambda: builds.family_exports(entry.kernel.compiled, entry.family))
    jobs = []
    for task in tasks:
        values, problem = exports[task.entry]
        build, later = _resolved(lambda: _build(loaded, task, builds, device_sm)) if problem is None else (None, None)
        jobs.append(Job(task, blob, values, build, problem or later))
    return jobs


def _build(loaded, task: Task, builds, device_sm: str | None) -> KernelBuild | None:
    """The task's CUDA kernel (a control's standing in for its entry's) built for its SMs; None for a Python one."""
    entry = loaded.entry(task.entry)
    kernel = entry.kernel if task.kind == "entry" else loaded.control(task.name).kernel
    sms = task_sms(loaded, task, device_sm)
    if kernel.compiled is None or not sms:
        return None
    return builds.kernel(kernel.compiled, sms, entry.kernel.compiled)


def _resolved(resolve) -> tuple[object, tuple[str, str] | None]:
    """What `resolve()` gives, or None and what kept it: an environment problem, or an error in one line."""
    try:
        return resolve(), None
    except EnvironmentProblem as problem:
        return None, ("environment", problem.message)
    except KContractError as error:
        return None, ("error", error.message)
    except OSError as error:
        return None, ("error", f"{type(error).__name__}: {error}")
