"""A revision found by content: HEAD's files, with each named file at the version of HEAD's history whose sha256 a
receipt recorded, so that a row survives the rebase or squash merge that removed the commit it ran at."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from kcontract.errors import UsageError
from kcontract.sassdiff.revision import checkout, run_git


def is_ancestor(repo: Path, commit: str) -> bool:
    """Whether `commit` is in this clone and in HEAD's history (so that every clone of the branch has it)."""
    done = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", commit, "HEAD"],
                          capture_output=True, check=False)
    return done.returncode == 0


def _blobs(repo: Path, path: str) -> list[str]:
    """The ids of every version of `path` in HEAD's history, newest first."""
    log = run_git(repo, "log", "--format=", "--raw", "--no-abbrev", "--no-renames", "HEAD", "--", path).decode()
    return list(dict.fromkeys(line.split()[3] for line in log.splitlines() if line.startswith(":")))


def _contents(repo: Path, blobs: list[str]) -> Iterator[bytes]:
    """The bytes of each blob this clone holds, read in one `git cat-file --batch` (one it lacks is left out)."""
    done = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="".join(f"{b}\n" for b in blobs)
                          .encode(), capture_output=True, check=False)
    out, at = done.stdout, 0
    while at < len(out):
        end = out.index(b"\n", at)
        header = out[at:end].split()  # `<oid> blob <size>`, then the bytes and a newline; or `<oid> missing`
        if len(header) != 3:
            at = end + 1
            continue
        size = int(header[2])
        yield out[end + 1:end + 1 + size]
        at = end + 1 + size + 1


def is_shallow(repo: Path) -> bool:
    """Whether this clone holds only part of its history."""
    return run_git(repo, "rev-parse", "--is-shallow-repository").decode().strip() == "true"


def version_with_sha256(repo: Path, path: str, sha256: str) -> bytes:
    """The bytes of the version of `path` in HEAD's history whose sha256 is `sha256`."""
    blobs = _blobs(repo, path)
    for data in _contents(repo, blobs) if blobs else ():
        if hashlib.sha256(data).hexdigest() == sha256:
            return data
    shallow = " (this clone is shallow: fetch its history, as actions/checkout's `fetch-depth: 0` does)"
    raise UsageError(f"{path} as it ran (sha256 {sha256[:12]}) is in none of HEAD's {len(blobs)} versions of it"
                     f"{shallow if is_shallow(repo) else ''}")


@contextlib.contextmanager
def by_content(repo: Path, files: dict[str, str]) -> Iterator[Path]:
    """HEAD exported, with each of `files` (path in the repository -> sha256) at the version that has that sha256."""
    found = {path: version_with_sha256(repo, path, sha) for path, sha in files.items()}
    with checkout(repo, "HEAD") as tree:
        for path, data in found.items():
            target = tree / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        yield tree
