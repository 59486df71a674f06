"""What every builder shares: a compile cache it trusts and, where it recompiles, a scratch cache of its own."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

from kcontract.toolchain.build import Module
from kcontract.toolchain.cache import CompileCache


class CacheBacked:
    """A builder's cache, folder, workers and toolchain (found on first use by `find`)."""

    def __init__(self, cache: CompileCache, base: Path, jobs: int | None = None, recompile: bool = False,
                 toolchain=None):
        """`recompile`: build every module afresh in a cache of its own (`cache`; `trusted` is the one given, whose
        modules `cached` finds for comparing), removed when the builder goes."""
        self.base, self.jobs, self.recompile, self.trusted = Path(base).resolve(), jobs, recompile, cache
        self.cache = cache
        if recompile:
            scratch = tempfile.mkdtemp(prefix="kcontract-recompiled-")
            weakref.finalize(self, shutil.rmtree, scratch, True)
            self.cache = CompileCache(Path(scratch))
        self._toolchain = toolchain

    def find(self):
        """This environment's toolchain for the builder's kind."""
        raise NotImplementedError

    @property
    def toolchain(self):
        """This environment's toolchain, found on first use."""
        if self._toolchain is None:
            self._toolchain = self.find()
        return self._toolchain

    def cached(self, module: Module) -> Module | None:
        """The trusted cache's module under a recompiled module's key, or None where it holds none."""
        hit = self.trusted.get(module.key)
        return None if hit is None else Module(module.unit, module.sm, module.key, hit.cubin_path, hit.lowered,
                                               hit.log, True, module.toolchain)

    def adopt(self, module: Module) -> None:
        """A recompiled module into the trusted cache, in place of what it held under the key."""
        self.trusted.adopt(module.key, self.cache)

    def rebased(self, base: Path):
        """The same builder for a contract folder elsewhere (another revision's), sharing the cache."""
        rebased = type(self)(self.trusted, base, self.jobs, False, self._toolchain)
        rebased.cache, rebased.recompile = self.cache, self.recompile
        return rebased
