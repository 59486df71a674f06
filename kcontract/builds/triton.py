"""The Triton builder: `@triton.jit` kernels compiled ahead of time for every target SM, through the same
content-addressed compile cache as CUDA's, with Triton's version and its ptxas in the toolchain id.

A unit is one symbol (a jit function with its constexprs and launch options) of one source and patch: Triton
makes a cubin per specialisation. Compiles run in spawned workers (triton_compile.py), so the user's module is
imported there and never in the session.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kcontract.builds.cache_backed import CacheBacked
from kcontract.builds.triton_compile import Compiled, compile_job
from kcontract.contract.model import TritonKernel
from kcontract.contract.patches import PatchError, read_patched
from kcontract.contract.paths import resolve_source
from kcontract.contract.triton_symbols import parse_symbol
from kcontract.errors import EnvironmentProblem, KContractError
from kcontract.toolchain.build import PTX_FILE, Batch, Build, Failure, Module, default_jobs, run_compiles
from kcontract.toolchain.cache import compile_key, inputs_digest
from kcontract.toolchain.exports import ExportError
from kcontract.toolchain.resources import parse_ptxas_log

META_FILE = "triton.json"  # Triton's metadata of a compile (shared bytes, warps, parameters), beside its cubin
SMS = (80, 86, 87, 89, 90, 100, 103, 110, 120, 121)  # the SM numbers Triton 3.6's NVIDIA backend compiles for
INSTALL_HINT = "Triton kernels need Triton: pip install 'kcontract[triton]'"


@dataclass(frozen=True)
class TritonUse:
    """The symbol of an entry's or a control's Triton kernel."""

    owner: str  # "entry" or "control"
    name: str
    role: str
    expression: str  # `fn(BLOCK=1024, num_warps=4)`
    label: str  # the source as the contract writes it
    source: Path
    patch_label: str | None = None
    patch: Path | None = None


@dataclass(frozen=True)
class TritonUnit:
    """One symbol of one source (with its patch): one cubin per SM."""

    label: str
    source: Path
    expression: str
    users: tuple[str, ...]
    patch_label: str | None = None
    patch: Path | None = None
    options: tuple[str, ...] = ()
    exports: tuple[str, ...] = ()

    @property
    def expressions(self) -> tuple[str, ...]:
        return (self.expression,)

    @property
    def ident(self) -> tuple[str, str, str | None]:
        """(label, expression, patch): what makes two uses share a unit."""
        return self.label, self.expression, self.patch_label

    @property
    def shown(self) -> str:
        """`kernels/x.py`, or `kernels/x.py with controls/y.patch`."""
        return self.label + (f" with {self.patch_label}" if self.patch_label else "")


@dataclass(frozen=True)
class TritonToolchain:
    """Triton and the ptxas binaries it carries: together they decide every cubin's bytes."""

    version: str
    ptxas: tuple[str, ...]  # ptxas versions: Hopper and older, then Blackwell where it differs
    sms: tuple[int, ...] = SMS

    @property
    def id(self) -> str:
        """`triton-3.6.0+ptxas-12.8.93+12.9.86`."""
        return f"triton-{self.version}+ptxas-{'+'.join(self.ptxas)}"

    def describe(self) -> str:
        return f"triton {self.version} (ptxas {', '.join(self.ptxas)})"

    def builds(self, sm: str) -> bool:
        """Whether Triton compiles for an SM (`sm_90a` or `sm_90`)."""
        return int(sm[3:].rstrip("af")) in self.sms

    def as_dict(self) -> dict:
        return {"id": self.id, "triton": self.version, "ptxas": list(self.ptxas)}


@functools.cache
def find_triton() -> TritonToolchain:
    """This environment's Triton, or EnvironmentProblem where it is not installed."""
    try:
        import triton
        from triton.backends.nvidia.compiler import get_ptxas
    except ImportError:
        raise EnvironmentProblem(INSTALL_HINT) from None
    versions = []
    for arch in (90, 100):
        try:
            text = subprocess.run([get_ptxas(arch).path, "--version"], capture_output=True, text=True).stdout
        except (OSError, RuntimeError) as error:
            raise EnvironmentProblem(f"Triton {triton.__version__}'s ptxas for sm_{arch} does not run ({error}): "
                                     f"reinstall Triton") from None
        found = re.search(r"V(\d+\.\d+\.\d+)", text)
        version = found.group(1) if found else "unknown"
        if version not in versions:
            versions.append(version)
    return TritonToolchain(triton.__version__, tuple(versions))


class TritonBuilder(CacheBacked):
    """Triton kernels: a unit per symbol, compiled by Triton for each SM, cache first."""

    kind = "triton"

    def find(self) -> TritonToolchain:
        return find_triton()

    @property
    def compiler(self) -> str:
        return f"triton {self.toolchain.version}"

    def handles(self, kernel) -> bool:
        return isinstance(kernel, (TritonKernel, TritonUse, TritonUnit))

    def uses(self, loaded) -> list[TritonUse]:
        return contract_triton_uses(loaded)

    def group(self, uses: list[TritonUse]) -> list[TritonUnit]:
        groups: dict[tuple, list[TritonUse]] = {}
        for use in uses:
            groups.setdefault((use.label, use.expression, use.patch_label or ""), []).append(use)
        return [TritonUnit(label, members[0].source, expression, tuple(dict.fromkeys(u.name for u in members)),
                           members[0].patch_label, members[0].patch)
                for (label, expression, _), members in sorted(groups.items())]

    def ident(self, kernel) -> tuple:
        if isinstance(kernel, TritonUnit):
            return kernel.ident
        if isinstance(kernel, TritonUse):
            return kernel.label, kernel.expression, kernel.patch_label
        return kernel.source, next(iter(kernel.symbols.values())), kernel.patch

    def alone(self, unit: TritonUnit, kernel) -> TritonUnit:
        """A Triton unit holds one jit function already."""
        return unit

    def build(self, units: list[TritonUnit], sms: list[str] | dict[tuple, list[str]],
              progress: Callable[[Batch], None] | None = None) -> Build:
        tool = self.toolchain
        wanted = {u.ident: list(sms[u.ident] if isinstance(sms, dict) else sms) for u in units}
        every = list(dict.fromkeys(sm for listed in wanted.values() for sm in listed))
        result = Build(tool, skipped=[sm for sm in every if not tool.builds(sm)])
        todo, pending = [], {}
        for unit in units:
            try:
                source = read_patched(unit.source, unit.patch)
            except OSError as error:
                result.failures += [Failure(unit, sm, f"cannot read {unit.source}: {error.strerror}")
                                    for sm in wanted[unit.ident]]
                continue
            except PatchError as error:
                result.failures += [Failure(unit, sm, f"{unit.patch_label}:{error.line}: {error.message}")
                                    for sm in wanted[unit.ident]]
                continue
            for sm in wanted[unit.ident]:
                if sm in result.skipped:
                    continue
                key = compile_key(toolchain=tool.id, label=unit.label, source=source, headers={},
                                  names=unit.expressions, sm=sm, options=())
                hit = self.cache.get(key)
                if hit is not None:
                    result.modules[(unit.ident, sm)] = Module(unit, sm, key, hit.cubin_path, hit.lowered, hit.log,
                                                              True, tool.id)
                    result.cached += 1
                    continue
                if key not in pending:
                    todo.append((key, source, str(unit.source.resolve()), unit.expression, int(sm[3:].rstrip("af"))))
                pending.setdefault(key, []).append((unit, sm))
        self._compile(result, todo, pending, progress)
        return result

    def _compile(self, result: Build, todo: list[tuple], pending: dict, progress) -> None:
        """Run the compiles, keeping each as it finishes; `progress` hears of each."""
        per_unit: dict[tuple, int] = {}
        for waiting in pending.values():
            for unit, _ in waiting:
                per_unit[unit.ident] = per_unit.get(unit.ident, 0) + 1
        finished: dict[tuple, int] = {}
        if progress is not None and todo:
            progress(Batch("", 0, 0, 0, len(todo)))
        for done, (key, outcome) in enumerate(run_compiles(todo, self.jobs or default_jobs(), compile_job), 1):
            for unit, sm in pending[key]:
                self._keep(result, key, unit, sm, outcome)
                finished[unit.ident] = finished.get(unit.ident, 0) + 1
                if progress is not None:
                    progress(Batch(unit.shown, finished[unit.ident], per_unit[unit.ident], done, len(todo)))

    def _keep(self, result: Build, key: str, unit: TritonUnit, sm: str, outcome) -> None:
        if not isinstance(outcome, Compiled):
            result.failures.append(Failure(unit, sm, outcome.log))
            return
        facts = {"label": unit.shown, "sm": sm, "names": [unit.expression], "toolchain": result.toolchain.id}
        stored = self.cache.put(key, outcome.cubin, outcome.lowered, outcome.log, facts)
        self.cache.put_text(key, META_FILE, json.dumps(outcome.metadata, sort_keys=True))
        self.cache.put_text(key, PTX_FILE, outcome.ptx)
        result.modules[(unit.ident, sm)] = Module(unit, sm, key, stored.cubin_path, stored.lowered, stored.log, False,
                                                  result.toolchain.id)
        result.compiled += 1

    def metadata(self, module: Module) -> dict:
        """Triton's metadata of a module: its name, shared bytes, warps, stages and parameters."""
        text = self.cache.text(module.key, META_FILE) or self.trusted.text(module.key, META_FILE)
        if text is None:
            raise KContractError(f"{module.unit.shown} on {module.sm}: its compile cache entry lacks {META_FILE}; "
                                 f"remove it (`kcontract cache clear`) to compile it again")
        return json.loads(text)

    def resources(self, module: Module) -> dict[str, dict[str, int]]:
        return {name: found.as_dict() for name, found in parse_ptxas_log(module.log).items()}

    def exports(self, module: Module, kernel) -> dict[str, int]:
        """A Triton kernel's exports: `shared` (its dynamic shared bytes), `num_warps`, `num_stages`, or one of
        its constexprs by name."""
        meta = self.metadata(module)
        values = {**meta["constexprs"], "shared": meta["shared"], "num_warps": meta["num_warps"],
                  "num_stages": meta["num_stages"]}
        found = {}
        for name, expression in kernel.exports.items():
            value = values.get(expression)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ExportError(f"{module.unit.shown} exports {name} as {expression!r}, which is no integer "
                                  f"constexpr of it nor shared, num_warps or num_stages")
            found[name] = value
        return found

    def divisors(self, module: Module, kernel: TritonKernel) -> dict[str, dict[int, tuple[str, int]]]:
        """Each symbol's declared `divisibility`, by the position of the argument it was compiled to assume."""
        params = self.metadata(module)["params"]
        found = {}
        for expression in kernel.symbols.values():
            if expression in module.lowered:
                declared = parse_symbol(expression).divisibility
                found[module.lowered[expression]] = {params.index(name): (name, divisor)
                                                     for name, divisor in declared.items()}
        return found

    def inputs_sha256(self, kernel: TritonKernel) -> str:
        """OSError where a file cannot be read, PatchError where the patch does not apply."""
        source = read_patched(resolve_source(self.base, kernel.source),
                              resolve_source(self.base, kernel.patch) if kernel.patch else None)
        return inputs_digest(source, {}, tuple(kernel.symbols.values()))

    def ptx(self, unit: TritonUnit, expressions: tuple[str, ...], sm: str) -> tuple[str | None, dict[str, str], str]:
        built = self.build([unit], [sm])
        module = built.module(unit, sm)
        if module is None:
            return None, {}, built.failures[0].log if built.failures else f"{self.toolchain.id} cannot build {sm}"
        return self.cache.text(module.key, PTX_FILE) or "", module.lowered, ""


def triton_uses(owner: str, name: str, kernel: TritonKernel | None, base: Path) -> list[TritonUse]:
    """The symbols of one Triton kernel reference (none for another kind)."""
    if kernel is None:
        return []
    source = resolve_source(base, kernel.source)
    patch = resolve_source(base, kernel.patch) if kernel.patch else None
    return [TritonUse(owner, name, role, expression, kernel.source, source, kernel.patch, patch)
            for role, expression in kernel.symbols.items()]


def contract_triton_uses(loaded) -> list[TritonUse]:
    """Every Triton kernel symbol of a LoadedContract's entries and controls."""
    base = Path(loaded.path).resolve().parent
    found = []
    for owner, items in (("entry", loaded.entries), ("control", loaded.controls)):
        for item in items:
            found += triton_uses(owner, item.name, item.kernel.triton, base)
    return found
