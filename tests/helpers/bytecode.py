"""The test run's bytecode folder (PYTHONPYCACHEPREFIX) seeded with the bytecode already beside the interpreter's
installed sources: under a prefix Python reads and writes bytecode only there, so a fresh folder has every process
compile the standard library, numpy, torch and the rest again (thousands of modules, and several processes at once
at the start); a link to the installed .pyc is what the first of them would have written. Python checks a .pyc
against its source's mtime and size wherever it lies, and writes a new one over the link (never through it)."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import threading
from importlib import metadata
from pathlib import Path


class Seeding:
    """Links into `prefix` to the compiled modules beside installed sources outside `skip`: at once those this
    process has imported; then, by a thread in the background, those of the distributions the `needed` ones
    require (with every extra of their own) and of the standard library. `stop()` ends the thread."""

    def __init__(self, prefix: Path, skip: Path, needed: tuple[str, ...] = ("kcontract", "pip")):
        self.prefix, self.skip = str(prefix), str(skip)
        self.suffix = f".{sys.implementation.cache_tag}.pyc"
        self.stopped = threading.Event()
        for module in list(sys.modules.values()):
            source = getattr(module, "__file__", None)
            if isinstance(source, str) and source.endswith(".py"):
                folder, name = os.path.split(source)
                self._link(os.path.join(folder, "__pycache__"), folder, [name[:-3] + self.suffix])
        self.thread = threading.Thread(target=self._seed, args=(needed,), name="bytecode-seeding", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()

    def _seed(self, needed: tuple[str, ...]) -> None:
        for dist in _needed(needed):
            for file in dist.files or ():  # the installer's record lists the bytecode it wrote
                if self.stopped.is_set():
                    return
                if file.name.endswith(self.suffix) and file.parent.name == "__pycache__":
                    cache = os.path.dirname(str(dist.locate_file(file)))
                    self._link(cache, os.path.dirname(cache), [file.name])
        self._walk(sysconfig.get_paths()["stdlib"])

    def _skipped(self, folder: str) -> bool:
        return folder == self.skip or folder.startswith(self.skip + os.sep)

    def _walk(self, root: str) -> None:
        """The standard library's folders, not the site-packages inside it."""
        for folder, subfolders, files in os.walk(root):
            if self.stopped.is_set():
                return
            subfolders[:] = [s for s in subfolders if s != "site-packages"]
            if os.path.basename(folder) == "__pycache__":
                self._link(folder, os.path.dirname(folder), files)

    def _link(self, cache: str, sources: str, names: list[str]) -> None:
        """Link `cache`/NAME to where the prefix has Python look for the bytecode of `sources`' modules."""
        if self._skipped(sources):
            return
        target = os.path.join(self.prefix, sources.lstrip(os.sep))
        made = False
        for name in names:
            if not name.endswith(self.suffix) or not os.path.isfile(os.path.join(cache, name)):
                continue
            if not made:
                os.makedirs(target, exist_ok=True)
                made = True
            try:
                os.symlink(os.path.join(cache, name), os.path.join(target, name))
            except OSError:  # already there: linked before, or written by a process that compiled it first
                pass


def _needed(roots: tuple[str, ...]) -> list[metadata.Distribution]:
    """The installed distributions among `roots`, those they require with every extra of theirs, and what those
    require in turn without extras."""
    seen, found, todo = set(), [], []

    def take(name: str) -> None:
        """The distribution `name`, once, where installed, its requirements to follow."""
        seen.add(name)
        try:
            found.append(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            return
        todo.append(name)

    for root in roots:
        take(root)
    while todo:
        asker = todo.pop(0)
        try:
            requires = metadata.requires(asker) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            if asker not in roots and re.search(r";.*\bextra\s*==", requirement):
                continue
            name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower().replace("_", "-")
            if name not in seen:
                take(name)
    return found
