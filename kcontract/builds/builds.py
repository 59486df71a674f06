"""`Builds`: the manifest of a contract's compiled kernels, made once by the session.

It groups the contract's kernel uses into units once, compiles what a run needs per SM through one cache (each
kernel kind by its builder: builder.py, cuda.py), and answers for each kernel use its module, its lowered names,
its launch exports and its machine code. Gate 5, receipts' currency, sass-diff, mutate and coverage ask it instead
of compiling; a job carries what it resolved (artifact.py), so a worker loads a cubin and compiles nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from kcontract.builds.artifact import KernelBuild, ModuleBuild
from kcontract.builds.builder import Builder
from kcontract.builds.cuda import CudaBuilder
from kcontract.builds.triton import TritonBuilder
from kcontract.cachedir import cache_root
from kcontract.contract.patches import PatchError
from kcontract.errors import KContractError
from kcontract.toolchain.build import Batch, Build, Module
from kcontract.toolchain.cache import CompileCache
from kcontract.toolchain.exports import ExportError


class Builds:
    """Every unit of a contract's kernels, and each one's module per SM once something asked for it."""

    def __init__(self, uses: list, base: Path, targets: list[str], root: Path, *, jobs: int | None = None,
                 progress: Callable[[Batch], None] | None = None, recompile: bool = False,
                 builders: list[Builder] | None = None):
        """`uses`: the kernel uses to build (a contract's: `Builds.of`); `base`: the contract's folder; `root`: the
        compile cache; `recompile`: compile every module afresh, apart from the cache (`recompiled` pairs each with
        the cache's); `builders`: one per kernel kind (default: CUDA's, in `root`)."""
        self.base, self.targets, self.progress = Path(base).resolve(), list(targets), progress
        self.recompile = recompile
        self.builders = builders if builders is not None else default_builders(root, self.base, jobs, recompile)
        self._units: dict[tuple, tuple[Builder, object]] = {}  # (kind, ident) -> (builder, unit)
        self._built: dict[str, Build] = {}  # kind -> every module and failure so far
        self._asked: set[tuple] = set()  # (kind, ident, sm) compiled, failed or skipped
        self._read: dict[tuple, dict[str, int]] = {}  # (module key, exports asked) -> their values
        for builder in self.builders:
            for unit in builder.group([use for use in uses if builder.handles(use)]):
                self._units[(builder.kind, unit.ident)] = (builder, unit)

    @classmethod
    def of(cls, loaded, *, jobs: int | None = None, progress: Callable[[Batch], None] | None = None,
           recompile: bool = False, root: Path | None = None) -> Builds:
        """The builds of a loaded contract: every kernel its entries and controls name, in its cache (`root`: another
        compile cache, as for a revision's contract exported outside the work tree)."""
        base, root = Path(loaded.path).resolve().parent, root or cache_root(loaded.path)
        builders = default_builders(root, base, jobs, recompile)
        uses = [use for builder in builders for use in builder.uses(loaded)]
        return cls(uses, base, loaded.targets, root, progress=progress, recompile=recompile, builders=builders)

    @property
    def units(self) -> list:
        """Every unit, each kind's in its builder's order."""
        return [unit for _, unit in self._units.values()]

    @property
    def cuda(self) -> CudaBuilder:
        """The CUDA builder."""
        return self._builder("cuda")

    @property
    def toolchain(self):
        """The CUDA toolchain (found on first use)."""
        return self.cuda.toolchain

    @property
    def cache(self) -> CompileCache:
        """The compile cache, where derived text (SASS) lives beside each module."""
        return self.cuda.cache

    def recompiled(self) -> list[tuple[Module, Module | None]]:
        """With `recompile`: each module compiled so far, with the module the cache held under its key (or None)."""
        return [(module, builder.cached(module)) for builder in self.builders
                for module in self._built.get(builder.kind, Build()).modules.values()]

    def adopt(self, module: Module) -> None:
        """A recompiled module into the cache, in place of the one it held under the same key."""
        self._lookup(module.unit)[0].adopt(module)

    def _builder(self, kind: str) -> Builder:
        return next(b for b in self.builders if b.kind == kind)

    def _lookup(self, kernel) -> tuple[Builder, object]:
        """The builder and unit of a kernel (or a unit); KeyError where it is no kernel of these builds."""
        for builder in self.builders:
            if builder.handles(kernel):
                found = self._units.get((builder.kind, builder.ident(kernel)))
                if found is not None:
                    return found
        raise KeyError(f"{getattr(kernel, 'source', getattr(kernel, 'label', kernel))} is no kernel of the contract")

    def unit(self, kernel):
        """The unit a kernel compiles in: its source and options with every name any use gives it."""
        return self._lookup(kernel)[1]

    def build(self, kernels: list | None = None, sms: list[str] | None = None) -> Build:
        """Compile what is not yet built of `kernels` (kernels or units; default every unit) for `sms` (default the
        targets), every kind by its builder; the Build of just those, their counts included."""
        chosen = [self._lookup(k) for k in kernels] if kernels is not None else list(self._units.values())
        sms = list(self.targets if sms is None else sms)
        view = Build()
        for builder in self.builders:
            mine = list({id(u): u for b, u in chosen if b is builder}.values())
            if mine:
                self._ensure(builder, mine, sms)
                _narrow(self._built[builder.kind], mine, sms, view)
        return view

    def build_each(self, asks: list[tuple[list, list[str]]]) -> Build:
        """Compile what is not yet built of each (kernels, SMs) ask in one batch per kernel kind, so the compiles of
        every ask share the cores; the Build of just those, their counts included."""
        view = Build()
        for builder in self.builders:
            wants: dict[tuple, tuple[object, list[str]]] = {}
            for kernels, sms in asks:
                for owner, unit in (self._lookup(k) for k in kernels):
                    if owner is builder:
                        listed = wants.setdefault(unit.ident, (unit, []))[1]
                        listed += [sm for sm in sms if sm not in listed]
            if wants:
                self._ensure(builder, [unit for unit, _ in wants.values()],
                             {ident: sms for ident, (_, sms) in wants.items()})
                for unit, sms in wants.values():
                    _narrow(self._built[builder.kind], [unit], sms, view)
        view.skipped.sort(key=self._order)
        return view

    def _ensure(self, builder: Builder, units: list, sms: list[str] | dict[tuple, list[str]]) -> None:
        """Compile the (unit, SM)s not asked before through the builder, in one batch (`sms`: for every unit, or
        per unit ident)."""
        whole = self._built.setdefault(builder.kind, Build(builder.toolchain))
        missing: dict[tuple, list[str]] = {}
        for unit in units:
            left = [sm for sm in (sms[unit.ident] if isinstance(sms, dict) else sms)
                    if (builder.kind, unit.ident, sm) not in self._asked]
            if left:
                missing[unit.ident] = left
        todo = [unit for unit in units if unit.ident in missing]
        if not todo:
            return
        part = builder.build(todo, missing, self.progress)
        whole.modules.update(part.modules)
        whole.failures += part.failures
        whole.skipped = sorted(set(whole.skipped) | set(part.skipped), key=self._order)
        self._asked.update((builder.kind, ident, sm) for ident, left in missing.items() for sm in left)

    def _order(self, sm: str) -> int:
        return self.targets.index(sm) if sm in self.targets else len(self.targets)

    def module(self, kernel, sm: str) -> Module | None:
        """A kernel's module for one SM (compiled or found on first ask), or None where it does not build there."""
        return self.build([kernel], [sm]).module(self.unit(kernel), sm)

    def held(self, kernel, sm: str) -> Module | None:
        """A kernel's module for one SM where it was already built (nothing is compiled), else None."""
        builder, unit = self._lookup(kernel)
        built = self._built.get(builder.kind)
        return built.module(unit, sm) if built is not None else None

    def exports_sms(self) -> list[str]:
        """The SM whose module a family's exports are read from: the first target the toolchain builds (none: [])."""
        return [sm for sm in self.targets if self.toolchain.builds(sm)][:1]

    def family_exports(self, kernel, family) -> dict[str, int]:
        """The exports a family reads of an entry's kernel (those its arithmetic needs and those it launches by),
        from its module for the first target SM the toolchain builds: facts of its arithmetic and tiling, the same
        on every SM. ExportError where the kernel does not compile there."""
        names = family.exports_needed() + family.launch_exports()
        if kernel is None or not names:
            return {}
        sm = next(iter(self.exports_sms()), None)
        module = self.module(kernel, sm) if sm else None
        if module is None:
            raise ExportError(f"{kernel.source} does not compile for {sm or 'any target SM'}, so its exports cannot "
                              f"be read")
        values = self._exports(self._lookup(kernel)[0], module, kernel)
        return {name: values[name] for name in names}

    def launch_exports(self, entry_kernel, kernel, sms: list[str]) -> tuple[dict[str, dict[str, int]], list[str]]:
        """The exports a kernel's launch reads, per SM built, and the errors of those that cannot be read."""
        found, errors = self._launch_exports(entry_kernel, kernel, sms)
        return found, list(errors.values())

    def _launch_exports(self, entry_kernel, kernel, sms: list[str]) -> tuple[dict[str, dict[str, int]],
                                                                             dict[str, str]]:
        """A stand-in (a control, a mutant) launched as its entry is takes its entry's exports, so its launch is
        the production one; a kernel with a launch of its own, its own. Errors by SM."""
        source = entry_kernel if entry_kernel is not None and (kernel.launch, kernel.exports) == (
            entry_kernel.launch, entry_kernel.exports) else kernel
        if not source.exports:
            return {}, {}
        builder = self._lookup(source)[0]
        built, found, errors = self.build([source], sms), {}, {}
        for sm in sms:
            module = built.module(self.unit(source), sm)
            if module is None:
                continue
            try:
                found[sm] = self._exports(builder, module, source)
            except ExportError as error:
                errors[sm] = f"{source.source} on {sm}: {error.message}"
        return found, errors

    def _exports(self, builder: Builder, module: Module, kernel) -> dict[str, int]:
        """A kernel's exported constants in a module, read once per module (its key is its content)."""
        asked = (module.key, tuple(sorted(kernel.exports.items())))
        if asked not in self._read:
            self._read[asked] = builder.exports(module, kernel)
        return self._read[asked]

    def kernel(self, kernel, sms: list[str], entry_kernel=None) -> KernelBuild:
        """What a job carries of a kernel (an entry's; a control's standing in for `entry_kernel`): its module on
        each of `sms` it builds for, with its symbols' names and resources and its launch exports read from it."""
        builder, unit = self._lookup(kernel)
        built = self.build([kernel], sms)
        exports, errors = self._launch_exports(entry_kernel if entry_kernel is not None else kernel, kernel,
                                               [sm for sm in sms if sm not in built.skipped])
        modules = {}
        for sm in sms:
            module = built.module(unit, sm)
            if module is not None:
                lowered = {e: module.lowered[e] for e in kernel.symbols.values() if e in module.lowered}
                resources = {m: r for m, r in builder.resources(module).items() if m in lowered.values()}
                divisors = {m: d for m, d in builder.divisors(module, kernel).items() if m in lowered.values()}
                modules[sm] = ModuleBuild(sm, str(module.cubin_path), lowered, resources, module.cached, divisors)
        digest, why = None, ""
        try:
            digest = builder.inputs_sha256(kernel)
        except OSError as error:
            why = f"cannot read {kernel.source}: {error.strerror}"
        except PatchError as error:
            why = f"{kernel.patch}:{error.line}: {error.message}"
        return KernelBuild(builder.kind, kernel.source, unit.shown, builder.toolchain.id, builder.compiler, digest,
                           modules, {f.sm: f.log for f in built.failures if f.sm in sms}, tuple(built.skipped),
                           exports, errors, why)

    def ptx(self, kernel, expressions: tuple[str, ...], sm: str) -> tuple[str, dict[str, str]]:
        """The PTX of a kernel's unit compiled with only `expressions` for `sm`, and their lowered names; a
        KContractError with the compiler's log where it does not compile."""
        builder, unit = self._lookup(kernel)
        text, lowered, log = builder.ptx(unit, tuple(expressions), sm)
        if text is None:
            raise KContractError(f"{unit.shown} does not compile for {sm} with only {', '.join(expressions)}: "
                                 f"{log.strip()[:1500]}")
        return text, lowered

    def alone(self, kernel) -> Builds:
        """These builds with `kernel`'s unit holding only the names `kernel` gives it: an earlier revision whose
        source lacks another use's names (a kernel added since) still builds this one."""
        builder, unit = self._lookup(kernel)
        other = Builds([], self.base, self.targets, self.cache.root, progress=self.progress,
                       recompile=self.recompile, builders=self.builders)
        other._units = {**self._units, (builder.kind, unit.ident): (builder, builder.alone(unit, kernel))}
        return other

    def other_revision(self, base: Path) -> Builds:
        """The same kernels built from another revision's files: `base` is the contract's folder in its tree
        (sources, headers and patches are read there), the cache and toolchain shared."""
        base = Path(base).resolve()
        other = Builds([], base, self.targets, self.cache.root, progress=self.progress, recompile=self.recompile,
                       builders=[b.rebased(base) for b in self.builders])
        for (kind, ident), (builder, unit) in self._units.items():
            moved = dataclasses.replace(unit, source=_moved(unit.source, self.base, base),
                                        patch=_moved(unit.patch, self.base, base) if unit.patch else None)
            other._units[(kind, ident)] = (other._builder(kind), moved)
        return other


def default_builders(root: Path, base: Path, jobs: int | None = None, recompile: bool = False) -> list[Builder]:
    """One builder per kernel kind that compiles, CUDA's and Triton's, over the compile cache at `root`."""
    cache = CompileCache(root)
    return [CudaBuilder(cache, base, jobs, recompile), TritonBuilder(cache, base, jobs, recompile)]


def _moved(path: Path, old: Path, new: Path) -> Path:
    """`path` under `old` as the same path under `new`."""
    return new / Path(path).resolve().relative_to(old)


def _narrow(whole: Build, units: list, sms: list[str], into: Build) -> None:
    """The modules, failures and skipped SMs of `units` on `sms` from `whole`, added to `into` with their counts."""
    idents = {u.ident for u in units}
    into.toolchain = into.toolchain or whole.toolchain
    for (ident, sm), module in whole.modules.items():
        if ident in idents and sm in sms:
            into.modules[(ident, sm)] = module
            into.cached += module.cached
            into.compiled += not module.cached
    into.failures += [f for f in whole.failures if f.unit.ident in idents and f.sm in sms]
    into.skipped = sorted(set(into.skipped) | {sm for sm in whole.skipped if sm in sms},
                          key=lambda sm: (sm not in sms, sms.index(sm) if sm in sms else 0, sm))
