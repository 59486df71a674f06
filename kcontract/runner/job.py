"""A job: a task with what its worker needs, resolved once by the parent. The validated contract travels
pickled, and a worker unpickles it afresh for every job, so the user modules it names (Python kernels, a
project's families) are imported anew (decision 0007) while the YAML is neither read nor validated again; the
exports each entry's family reads of its CUDA kernel travel read, so no worker opens a cubin for them."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from kcontract.errors import KContractError
from kcontract.toolchain.built_exports import family_exports
from kcontract.verdict.outcome import Task


@dataclass(frozen=True)
class Job:
    """One task and its resolved inputs."""

    task: Task
    contract: bytes  # the LoadedContract, pickled
    exports: dict[str, int] | None = None  # the entry family's exports of its CUDA kernel; None: the worker reads them

    def loaded(self):
        """The contract, unpickled: its user modules import afresh where they are not loaded."""
        return pickle.loads(self.contract)


def jobs_for(loaded, tasks: list[Task]) -> list[Job]:
    """A job per task: the contract pickled once, each entry's exports read once (a kernel that does not build
    leaves its tasks to say so, as they did before)."""
    blob = pickle.dumps(loaded)
    exports: dict[str, dict[str, int] | None] = {}
    for name in dict.fromkeys(t.entry for t in tasks):
        entry = loaded.entry(name)
        try:
            exports[name] = family_exports(loaded, entry.kernel.cuda, entry.family)
        except (KContractError, OSError):
            exports[name] = None
    return [Job(t, blob, exports[t.entry]) for t in tasks]
