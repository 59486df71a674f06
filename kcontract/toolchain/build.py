"""Compile units for SMs through the cache: misses compile in parallel worker processes."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.contract.paths import option_paths
from kcontract.contract.patches import PatchError, read_patched
from kcontract.toolchain.cache import CompileCache, compile_key
from kcontract.toolchain.headers import include_dirs_of, local_headers
from kcontract.toolchain.locate import Toolchain, find_toolchain
from kcontract.toolchain.nvrtc import CompileError, Compiled, compile_job
from kcontract.toolchain.resources import FunctionResources, parse_ptxas_log
from kcontract.toolchain.units import Unit

JOBS_ENV = "KCONTRACT_JOBS"  # worker processes for cold compiles


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


def build(units: list[Unit], sms: list[str], cache: CompileCache, base: Path, jobs: int | None = None,
          toolchain: Toolchain | None = None) -> Build:
    """Compile every unit for every SM the toolchain builds for (cache first); `base` is the contract's
    directory. The toolchain is this environment's (`locate.find_toolchain`) unless one is given; its id is part of
    every cache key, so cubins of one toolchain never pass for another's."""
    tool = toolchain or find_toolchain()
    result = Build(tool, skipped=[sm for sm in sms if not tool.builds(sm)])
    if not units:
        return result
    todo: list[tuple] = []
    pending: dict[str, tuple[Unit, str, dict]] = {}
    for unit in units:
        try:
            source, headers, include = read_inputs(unit.source, unit.options, base, unit.patch)
        except OSError as error:
            for sm in sms:
                result.failures.append(Failure(unit, sm, f"cannot read {unit.source}: {error.strerror}"))
            continue
        except PatchError as error:
            for sm in sms:
                result.failures.append(Failure(unit, sm, f"{unit.patch_label}:{error.line}: {error.message}"))
            continue
        for sm in sms:
            if sm in result.skipped:
                continue
            key = compile_key(toolchain=tool.id, label=unit.label, source=source, headers=headers,
                              names=unit.expressions, sm=sm, options=unit.options, exports=unit.exports)
            hit = cache.get(key)
            if hit is not None:
                result.modules[(unit.ident, sm)] = Module(unit, sm, key, hit.cubin_path, hit.lowered, hit.log, True,
                                                          tool.id)
                result.cached += 1
                continue
            facts = {"label": unit.shown, "sm": sm, "names": list(unit.expressions), "options": list(unit.options),
                     "toolchain": tool.id}
            if unit.exports:
                facts["exports"] = list(unit.exports)
            pending[key] = (unit, sm, facts)
            # NVRTC resolves the program's quoted includes beside its name, taken from the working directory: the
            # source's absolute path makes them the files this key hashed, wherever kcontract runs from
            todo.append((key, str(tool.nvrtc.path), source, str(unit.source.resolve()),
                         unit.expressions + unit.exports, sm,
                         nvrtc_options(unit.options, base), (*include, str(tool.headers.path))))
    for key, outcome in _run(todo, jobs or default_jobs()):
        unit, sm, facts = pending[key]
        if isinstance(outcome, Compiled):
            stored = cache.put(key, outcome.cubin, outcome.lowered, outcome.log, facts)
            result.modules[(unit.ident, sm)] = Module(unit, sm, key, stored.cubin_path, stored.lowered, stored.log,
                                                      False, tool.id)
            result.compiled += 1
        else:
            result.failures.append(Failure(unit, sm, outcome.log))
    return result


def _run(todo: list[tuple], jobs: int):
    """Compile jobs in this process, or in spawned workers when there are several (not inside a worker)."""
    if len(todo) < 2 or jobs < 2 or multiprocessing.current_process().daemon:
        return [compile_job(job) for job in todo]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=context) as pool:
        return list(pool.map(compile_job, todo))
