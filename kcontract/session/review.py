"""`kcontract review` as a session step: a pull request's whole receipt against its base branch.

Both revisions are built for every target SM and compared (sass-diff); the head's rows that are not current
against the base's receipt run (`--stale` on a copy of it); the calls of every entry whose kernel changed, and of
every entry that shares a source file with one, are timed on the base's build and the head's, ABBA, in this process
on one GPU. Nothing is printed here; the front door says the lines and writes the files.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from kcontract.builds.builds import Builds
from kcontract.cachedir import CACHE_ENV, cache_root
from kcontract.errors import UsageError
from kcontract.receipts.write import environment
from kcontract.review.changes import Changes, changes
from kcontract.review.result import Review, Revision
from kcontract.review.speed import Settings
from kcontract.review.timing import Clock, time_entries
from kcontract.sassdiff.diff import sass_diff
from kcontract.sassdiff.revision import checkout, commit_of, repo_root
from kcontract.session.listeners import RunListener
from kcontract.session.review_base import BaseContract, base_contract, entry_kernels
from kcontract.session.review_contract import contract_run
from kcontract.session.session import Session
from kcontract.toolchain.tools import find_tool

Say = Callable[[str], None]


@dataclass(frozen=True)
class ReviewOptions:
    """What a review compares, and how it times."""

    contract: str
    base: str
    head: str | None = None  # None: the working tree
    settings: Settings = Settings()
    jobs: int | str = "auto"
    receipt: str | None = None  # where the head's receipt is written; None: nowhere


@dataclass
class _Where:
    """The repository, the contract's path in it and the two revisions."""

    repo: Path
    rel: str
    base: Revision
    head: Revision


def _where(options: ReviewOptions) -> _Where:
    """The git work tree holding the contract and the commits the revisions name (usage errors, one line)."""
    contract = Path(options.contract).resolve()
    if not contract.is_file():
        raise UsageError(f"--contract {options.contract}: no such file")
    repo = repo_root(contract.parent, "review")
    try:
        rel = contract.relative_to(repo.resolve()).as_posix()
    except ValueError:
        raise UsageError(f"{options.contract} is outside the git work tree {repo}") from None
    head = Revision(options.head, commit_of(repo, options.head)) if options.head else Revision("working tree", None)
    return _Where(repo, rel, Revision(options.base, commit_of(repo, options.base)), head)


@contextlib.contextmanager
def _shared_cache(root: Path) -> Iterator[None]:
    """Every build of the review (a revision exported outside the work tree included) in the contract's cache."""
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = before


def review(options: ReviewOptions, *, listeners: Iterable[RunListener] = (), say: Say = lambda line: None,
           clock: Clock | None = None, progress=None) -> Review:
    """The review of the head against the base; `clock` times calls (default: this GPU's, both builds loaded);
    `listeners` hear the contract's run, `say` the review's own lines, `progress` the compiles."""
    where, root = _where(options), cache_root(options.contract)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_shared_cache(root))
        base_tree = stack.enter_context(checkout(where.repo, where.base.commit))
        head_tree = stack.enter_context(checkout(where.repo, where.head.commit))
        say(f"sass-diff {where.base.short} -> {where.head.short}: building both revisions for every target SM")
        diff = sass_diff(where.repo, where.rel, where.base.commit, where.head.commit, None, root)
        session = Session(str(head_tree / where.rel) if where.head.commit else options.contract, progress=progress)
        base = base_contract(base_tree / where.rel, f"{where.base.short}:{where.rel}")
        found = changes(diff, entry_kernels(session.loaded, session.builds, base))
        ready = session.machine(cuda=True, gpu=bool(found.timed) and clock is None, names=found.timed, say=say)
        clock = clock or _gpu_clock(session, base, found, root, options.settings)
        part = contract_run(session, base_tree / where.rel, listeners, options.jobs, options.receipt)
        speed = time_entries(found, clock, options.settings, say) if found.timed else []
        notes = base.notes + list(getattr(clock, "notes", []))
        env = _environment(ready)
    diff.base, diff.head = where.base.short, where.head.short
    return Review(where.base, where.head, env, diff, found, part, speed, options.settings, notes)


def _gpu_clock(session: Session, base: BaseContract, found: Changes, root: Path, settings: Settings) -> Clock | None:
    """This GPU's clock over both revisions' builds, where there is anything to time."""
    if not found.timed:
        return None
    from kcontract.bench.pair import PairClock

    base_builds = Builds.of(base.loaded, root=root) if base.loaded is not None else None
    return PairClock(session.loaded, session.builds, base.loaded, base_builds, settings.repeat)


def _environment(ready) -> dict[str, object]:
    """The host, the toolchain, nvdisasm and, where this machine has one, the GPU."""
    from kcontract.launch import gpu_present

    tool = find_tool("nvdisasm")
    env = environment(gpu_present(), ready.toolchain.as_dict() if ready.toolchain else None)
    return env | {"nvdisasm": f"{tool.version} ({tool.origin})"}
