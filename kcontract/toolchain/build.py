"""Compile units for SMs through the cache: misses compile in parallel worker processes, the costliest first, and
each unit's compiles are reported as they finish."""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from kcontract.contract.paths import option_paths
from kcontract.contract.patches import PatchError, read_patched
from kcontract.toolchain.cache import CompileCache, compile_key
from kcontract.toolchain.headers import include_dirs_of, local_headers
from kcontract.toolchain.locate import Toolchain, find_toolchain
from kcontract.toolchain.nvrtc import CompileError, Compiled, compile_job
from kcontract.toolchain.resources import FunctionResources, parse_ptxas_log
from kcontract.toolchain.units import Unit

JOBS_ENV = "KCONTRACT_JOBS"  # worker processes for cold compiles
PTX_FILE = "module.ptx"  # a compile's PTX, kept beside its cubin where it was asked for


@dataclass
class Module:
    """One unit compiled for one SM: a cubin in the cache, mangled names and the ptxas report."""

    unit: Unit
    sm: str
    key: str
    cubin_path: Path
    lowered: dict[str, str]
    log: str
    cached: bool
    toolchain: str = ""  # the id of the toolchain that built the cubin

    def resources(self) -> dict[str, FunctionResources]:
        """Per-function resources by mangled name."""
        return parse_ptxas_log(self.log)


@dataclass
class Failure:
    """A unit that does not compile for an SM."""

    unit: Unit
    sm: str
    log: str

    def error(self) -> CompileError:
        """The user-facing error with the NVRTC log."""
        return CompileError(self.unit.shown, self.sm, self.log, self.unit.users)


@dataclass(frozen=True)
class Batch:
    """Where a build stands after a compile finished: a unit's batch (its compiles for the SMs asked) is done when
    `sms` reaches `of`; the first report, of no unit and none done, says how many compiles the build makes."""

    shown: str  # the unit's source (with its patch)
    sms: int  # its compiles finished
    of: int  # its compiles in this build
    done: int  # compiles finished so far in this build
    total: int  # compiles this build makes

    @property
    def whole(self) -> bool:
        """The unit's batch is done."""
        return self.of > 0 and self.sms == self.of


@dataclass
class Build:
    """Every (unit, SM) compiled or failed, the SMs the toolchain cannot build for, and cache hits."""

    toolchain: Toolchain | None = None
    modules: dict[tuple, Module] = field(default_factory=dict)  # (unit.ident, sm) -> Module
    failures: list[Failure] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # target SMs this toolchain's NVRTC cannot build for
    compiled: int = 0
    cached: int = 0

    def module(self, unit: Unit, sm: str) -> Module | None:
        """The module of `unit` for `sm`, or None where it failed."""
        return self.modules.get((unit.ident, sm))


def default_jobs() -> int:
    """$KCONTRACT_JOBS, else the CPU count (at most 8)."""
    value = os.environ.get(JOBS_ENV, "")
    return max(1, int(value)) if value.isdigit() else max(1, min(os.cpu_count() or 1, 8))


def read_inputs(source_path: Path, options: tuple[str, ...], base: Path,
                patch: Path | None = None) -> tuple[bytes, dict[str, bytes], tuple]:
    """Source bytes (with its patch applied, if any), local header bytes by path relative to the source, and
    include dirs for NVRTC."""
    dirs = include_dirs_of(options, base)
    source = read_patched(source_path, patch)
    headers = {}
    for header in local_headers(source_path, dirs):
        try:
            name = str(header.relative_to(source_path.parent.resolve()))
        except ValueError:
            name = header.name
        headers[name] = header.read_bytes()
    return source, headers, (str(source_path.parent.resolve()), *(str(d) for d in dirs))


def nvrtc_options(options: tuple[str, ...], base: Path) -> tuple[str, ...]:
    """The unit's options with the relative paths they name (header folders and files) made absolute from the
    contract's directory, where its loader judged them."""
    out = list(options)
    for index, _, value in option_paths(options):
        if not Path(value).is_absolute():
            out[index] = out[index][:len(out[index]) - len(value)] + str((base / value).resolve())
    return tuple(out)


def build(units: list[Unit], sms: list[str] | dict[tuple, list[str]], cache: CompileCache, base: Path,
          jobs: int | None = None, toolchain: Toolchain | None = None, progress: Callable[[Batch], None] | None = None,
          ptx: bool = False) -> Build:
    """Compile every unit for every SM of `sms` (or of `sms[unit.ident]`, SMs per unit, all in one batch) the
    toolchain builds for (cache first; `ptx`: keep each compile's PTX beside its cubin, PTX_FILE); `base` is the
    contract's directory; `progress` hears of every compile as it finishes. The toolchain is this environment's
    (`locate.find_toolchain`) unless one is given; its id is part of every cache key, so cubins of one toolchain
    never pass for another's. kcontract.builds is its one caller."""
    tool = toolchain or find_toolchain()
    wanted = {unit.ident: list(sms[unit.ident] if isinstance(sms, dict) else sms) for unit in units}
    every = list(dict.fromkeys(sm for unit_sms in wanted.values() for sm in unit_sms))
    result = Build(tool, skipped=[sm for sm in every if not tool.builds(sm)])
    todo: list[tuple] = []
    pending: dict[str, list[tuple[Unit, str, dict]]] = {}  # key -> the (unit, SM)s waiting on its compile
    for unit in units:
        sms = wanted[unit.ident]
        try:
            source, headers, include = read_inputs(unit.source, unit.options, base, unit.patch)
        except OSError as error:
            result.failures += [Failure(unit, sm, f"cannot read {unit.source}: {error.strerror}") for sm in sms]
            continue
        except PatchError as error:
            result.failures += [Failure(unit, sm, f"{unit.patch_label}:{error.line}: {error.message}") for sm in sms]
            continue
        for sm in sms:
            if sm in result.skipped:
                continue
            key = compile_key(toolchain=tool.id, label=unit.label, source=source, headers=headers,
                              names=unit.expressions, sm=sm, options=unit.options, exports=unit.exports)
            hit = cache.get(key)
            if hit is not None and not (ptx and cache.text(key, PTX_FILE) is None):
                result.modules[(unit.ident, sm)] = Module(unit, sm, key, hit.cubin_path, hit.lowered, hit.log, True,
                                                          tool.id)
                result.cached += 1
                continue
            facts = {"label": unit.shown, "sm": sm, "names": list(unit.expressions), "options": list(unit.options),
                     "toolchain": tool.id}
            if unit.exports:
                facts["exports"] = list(unit.exports)
            if key not in pending:
                # NVRTC resolves the program's quoted includes beside its name, taken from the working directory:
                # the source's absolute path makes them the files this key hashed, wherever kcontract runs from
                todo.append((key, str(tool.nvrtc.path), source, str(unit.source.resolve()),
                             unit.expressions + unit.exports, sm,
                             nvrtc_options(unit.options, base), (*include, str(tool.headers.path)), ptx))
            pending.setdefault(key, []).append((unit, sm, facts))
    _compile(result, cache, todo, pending, jobs or default_jobs(), progress)
    return result


def _compile(result: Build, cache: CompileCache, todo: list[tuple], pending: dict, jobs: int,
             progress: Callable[[Batch], None] | None) -> None:
    """Run the compiles, the costliest first, keeping each as it finishes; `progress` hears of each."""
    per_unit = Counter(unit.ident for waiting in pending.values() for unit, _, _ in waiting)
    finished: Counter = Counter()
    if progress is not None and todo:
        progress(Batch("", 0, 0, 0, len(todo)))
    for done, (key, outcome) in enumerate(run_compiles(sorted(todo, key=_cost, reverse=True), jobs), 1):
        for unit, sm, facts in pending[key]:
            _keep(result, cache, key, unit, sm, facts, outcome)
            finished[unit.ident] += 1
            if progress is not None:
                progress(Batch(unit.shown, finished[unit.ident], per_unit[unit.ident], done, len(todo)))


def _keep(result: Build, cache: CompileCache, key: str, unit: Unit, sm: str, facts: dict, outcome) -> None:
    """One finished compile into the cache and the build."""
    if not isinstance(outcome, Compiled):
        result.failures.append(Failure(unit, sm, outcome.log))
        return
    stored = cache.put(key, outcome.cubin, outcome.lowered, outcome.log, facts)
    if outcome.ptx:
        cache.put_text(key, PTX_FILE, outcome.ptx)
    result.modules[(unit.ident, sm)] = Module(unit, sm, key, stored.cubin_path, stored.lowered, stored.log, False,
                                              result.toolchain.id)
    result.compiled += 1


def _cost(job: tuple) -> int:
    """A compile's expected cost, to start the costliest first: source bytes times the instantiations asked."""
    return len(job[2]) * len(job[4])


def run_compiles(todo: list[tuple], jobs: int, work: Callable[[tuple], tuple] = compile_job) -> Iterator[tuple]:
    """Run compile jobs (`work`: NVRTC's by default) in this process, or in spawned workers when there are several
    (not inside a worker); each (key, result) as it finishes."""
    if len(todo) < 2 or jobs < 2 or multiprocessing.current_process().daemon:
        yield from (work(job) for job in todo)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=context) as pool:
        yield from (future.result() for future in as_completed([pool.submit(work, job) for job in todo]))
