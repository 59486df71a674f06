"""Files written whole or not at all, with the permissions the user's umask gives a new file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def new_file_mode() -> int:
    """The mode `open()` gives a new file under the process's umask (0644 under umask 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_writer(path: Path, prefix: str = ".tmp-") -> Iterator:
    """A binary handle on a temporary file beside `path` that replaces it when the block ends without error;
    readers see the old content or the new, never a part, and the file gets the umask's mode, not mkstemp's 0600."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all."""
    with atomic_writer(path) as handle:
        handle.write(data)
