"""The contracts given with --kcontract: found, loaded and planned once per session, a bad one a usage error."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from kcontract.contract.loaded import LoadedContract
from kcontract.contract.model import KernelRef
from kcontract.errors import KContractError
from kcontract.session.plan import Selection
from kcontract.session.options import RunOptions
from kcontract.session.session import Session
from kcontract.verdict.outcome import Task

MAX_SEED = 2**63 - 1


@dataclass
class ContractRun:
    """One contract: the path as typed, as kcontract is given it, absolute and resolved; loaded; its tasks."""

    typed: str
    arg: str  # the typed path where it is relative to the invocation folder, else the absolute one
    absolute: Path
    path: Path  # resolved: how collected files are matched
    invocation: Path
    loaded: LoadedContract
    tasks: list[Task]
    session: Session  # loaded the contract; checks the machine and builds the cubins before the first task

    def entry_tasks(self, name: str) -> list[Task]:
        """The entry's tasks, one per gate, by gate."""
        return sorted((t for t in self.tasks if t.kind == "entry" and t.name == name), key=lambda t: t.gates)

    def control_tasks(self) -> list[Task]:
        """The control tasks in the contract's order."""
        order = {c.name: i for i, c in enumerate(self.loaded.controls)}
        return sorted((t for t in self.tasks if t.kind == "control"), key=lambda t: order[t.name])

    def kernel(self, task: Task) -> KernelRef:
        """The kernel a task runs: the entry's own, or the control's."""
        return (self.loaded.entry(task.name) if task.kind == "entry" else self.loaded.control(task.name)).kernel

    def line(self, task: Task) -> int | None:
        """Where the task's entry or control starts in the contract file."""
        return (self.loaded.entry(task.name) if task.kind == "entry" else self.loaded.control(task.name)).line

    def worker_path(self) -> str:
        """The contract path workers are given: as typed while the working folder is still the invocation's."""
        return self.arg if Path.cwd() == self.invocation else str(self.absolute)


def _seed(config: pytest.Config) -> int | None:
    """--kcontract-seed, checked."""
    seed = config.getoption("kcontract_seed")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise pytest.UsageError(f"--kcontract-seed {seed}: give a seed from 0 to {MAX_SEED}")
    return seed


def _find(typed: str, invocation: Path) -> Path:
    """The absolute path of a typed contract path, resolved against the invocation folder; a usage error if absent."""
    given = Path(typed).expanduser()
    absolute = given if given.is_absolute() else invocation / given
    if absolute.is_file():
        return absolute
    what = "is a directory" if absolute.is_dir() else "no such file"
    raise pytest.UsageError(f"--kcontract {typed}: {what} (looked for {absolute}); give the path of a contract "
                            f"file, relative to {invocation} or absolute")


def load_runs(config: pytest.Config, typed: list[str]) -> list[ContractRun]:
    """Each contract given, once, loaded and planned; any mistake is a pytest usage error naming the file."""
    seed, cache = _seed(config), not config.getoption("kcontract_no_cache")
    invocation = Path(config.invocation_params.dir)
    runs: dict[Path, ContractRun] = {}
    for text in typed:
        absolute = _find(text, invocation)
        if absolute.resolve() in runs:
            continue
        relative = not Path(text).expanduser().is_absolute() and Path.cwd() == invocation
        arg = text if relative else str(absolute)
        try:
            session = Session(arg)
            tasks = session.plan(RunOptions(Selection(seed=seed), cache=cache)).tasks
        except KContractError as error:
            raise pytest.UsageError(*[f"--kcontract {text}: {line}" for line in error.lines()]) from None
        runs[absolute.resolve()] = ContractRun(text, arg, absolute, absolute.resolve(), invocation, session.loaded,
                                               tasks, session)
    return list(runs.values())


def _named_file(arg: str, invocation: Path) -> Path:
    """The file or folder a collection argument names (`a/b.yaml::x` names a/b.yaml)."""
    return (invocation / arg.split("::")[0]).resolve()


def add_collection_args(config: pytest.Config, runs: list[ContractRun]) -> None:
    """Collect each contract: beside the paths given on the command line, or alone where none was given (the
    testpaths are not collected then); a contract a command-line argument already names is not added again."""
    given = list(config.args) if config.args_source is pytest.Config.ArgsSource.ARGS else []
    invocation = Path(config.invocation_params.dir)
    named = {_named_file(arg, invocation) for arg in given}
    config.args = given + [str(run.absolute) for run in runs if run.path not in named]
    config.args_source = pytest.Config.ArgsSource.ARGS


def prune_caches(runs, began: float) -> None:
    """Keep each contract's cache under its cap, sparing what this session used."""
    from kcontract.cachesize import keep_under_cap
    from kcontract.cachedir import cache_root

    for root in {cache_root(str(run.absolute)) for run in runs}:
        if os.path.isdir(root):
            keep_under_cap(root, began)
