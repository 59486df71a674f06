"""A revision's files: the working tree as it is, or a commit exported read-only into a temporary directory."""

from __future__ import annotations

import contextlib
import io
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kcontract.errors import EnvironmentProblem, UsageError


def run_git(repo: Path, *args: str) -> bytes:
    """Run git in `repo`; its failure is a UsageError with git's message."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise EnvironmentProblem("sass-diff needs git on the PATH: install git") from None
    if done.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed in {repo}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def repo_root(path: Path, command: str = "sass-diff") -> Path:
    """The top of the git work tree holding `path` (`command`: which command needs it, for the message)."""
    try:
        return Path(run_git(path, "rev-parse", "--show-toplevel").decode().strip())
    except UsageError:
        raise UsageError(f"{command} compares git revisions, and {path} is not inside a git work tree") from None


def commit_of(repo: Path, rev: str) -> str:
    """The full commit id a revision names."""
    try:
        return run_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except UsageError:
        raise UsageError(f"no commit `{rev}` in {repo} (try HEAD, HEAD~1, a branch or a commit id)") from None


@contextlib.contextmanager
def checkout(repo: Path, rev: str | None) -> Iterator[Path]:
    """The work tree for rev None; else `git archive` of the commit unpacked in a temporary directory.

    An archive, unlike a worktree, writes nothing into the repository (no .git/worktrees entry, no index lock), so
    it is safe on read-only or busy checkouts and leaves nothing behind after a crash.
    """
    if rev is None:
        yield repo
        return
    commit = commit_of(repo, rev)
    with tempfile.TemporaryDirectory(prefix="kcontract-rev-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(run_git(repo, "archive", "--format=tar", commit))) as tar:
            if hasattr(tarfile, "data_filter"):
                try:
                    tar.extractall(tmp, filter="data")
                except tarfile.FilterError as error:  # a link out of the tree, an absolute path
                    raise UsageError(f"{rev}: {error}: sass-diff unpacks a revision's files only inside it; make the "
                                     f"link relative, within the repository") from None
            else:
                tar.extractall(tmp)
        yield Path(tmp)

