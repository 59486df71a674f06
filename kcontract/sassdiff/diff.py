"""Build two revisions for every SM and say, per kernel instantiation and SM, whether the machine code changed;
each revision's kernels are a `Builds` of its own contract, both in one compile cache."""

from __future__ import annotations

import difflib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.builds.builds import Builds
from kcontract.sassdiff.kernels import contract_kernels
from kcontract.sassdiff.same_code import disassembled, same_bytes
from kcontract.sassdiff.normalise import kernel_code
from kcontract.sassdiff.revision import checkout
from kcontract.sms import sm_number
from kcontract.toolchain.build import Build, Module, default_jobs
from kcontract.toolchain.cache import CompileCache
from kcontract.toolchain.locate import find_toolchain
from kcontract.toolchain.units import Unit

SAME_BYTES, SAME_SASS, CHANGED, NEW, REMOVED, BROKEN = (
    "identical bytes", "identical SASS", "changed", "new", "removed", "does not compile")
EQUAL = (SAME_BYTES, SAME_SASS)
DIFF_LINES = 40  # diff lines shown per changed function before "... N more"


@dataclass
class FunctionResult:
    """One kernel instantiation on one SM."""

    label: str  # the source as the contract writes it
    expression: str
    sm: str
    verdict: str
    diff: list[str] = field(default_factory=list)


@dataclass
class SassDiff:
    """Every instantiation x SM compared, and the compile failures of either side."""

    base: str
    head: str
    sms: list[str]
    results: list[FunctionResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # target SMs the toolchain in use cannot build for
    toolchain: str = ""

    def count(self, verdict: str) -> int:
        """Results with a verdict."""
        return sum(1 for r in self.results if r.verdict == verdict)

    def source_lines(self) -> list[str]:
        """One verdict per source file: SMs on which all its functions kept their SASS, and functions that did."""
        lines = []
        for label in sorted({r.label for r in self.results}):
            mine = [r for r in self.results if r.label == label]
            sms = sorted({r.sm for r in mine}, key=sm_number)
            functions = sorted({r.expression for r in mine})
            sm_ok = sum(all(r.verdict in EQUAL for r in mine if r.sm == sm) for sm in sms)
            fn_ok = sum(all(r.verdict in EQUAL for r in mine if r.expression == fn) for fn in functions)
            lines.append(f"{label}: SASS equal on {sm_ok} of {len(sms)} SMs, {fn_ok} of {len(functions)} functions")
        return lines

    def changed_blocks(self) -> list[str]:
        """For each function whose code changed: the SMs and the compact diff (grouped when SMs agree)."""
        groups: dict[tuple, list[str]] = {}
        for r in self.results:
            if r.verdict not in EQUAL:
                groups.setdefault((r.label, r.expression, r.verdict, tuple(r.diff)), []).append(r.sm)
        blocks = []
        for (label, expression, verdict, diff), sms in groups.items():
            head = f"{verdict}: {label} {expression} on {', '.join(sorted(sms, key=sm_number))}"
            blocks.append("\n".join([head, *diff]) if diff else head)
        return blocks

    def summary(self) -> str:
        """The closing line."""
        functions = len({(r.label, r.expression) for r in self.results})
        sources = len({r.label for r in self.results})
        text = (f"SASS-DIFF {self.base} -> {self.head}: {sources} sources, {functions} functions x {len(self.sms)} "
                f"SMs: {self.count(SAME_BYTES)} identical bytes, {self.count(SAME_SASS)} identical SASS, "
                f"{self.count(CHANGED)} changed, {self.count(NEW)} new, {self.count(REMOVED)} removed")
        broken = self.count(BROKEN)
        skipped = f"; {', '.join(self.skipped)} skipped ({self.toolchain} cannot build for them)" if self.skipped else ""
        return text + (f", {broken} do not compile" if broken else "") + skipped

    @property
    def changed(self) -> bool:
        """Anything other than identical bytes or identical SASS."""
        return any(r.verdict not in EQUAL for r in self.results)


@dataclass
class _Side:
    """One revision built: its kernels by (source, expression), units and modules."""

    functions: dict[tuple[str, str], Unit]
    built: Build
    cache: CompileCache  # where its modules (and their SASS) live


def _build_side(directory: Path, contract_rel: str, shown: str, sms: list[str] | None, root: Path,
                jobs: int) -> tuple[list[str], _Side]:
    """Read a revision's contract and compile its kernels for the SMs (the contract's targets by default)."""
    contract = directory / contract_rel
    found = contract_kernels(contract, shown)
    targets, uses = found if found is not None else ([], [])
    builds = Builds(uses, contract.parent, targets, root, jobs=jobs)
    functions: dict[tuple[str, str], Unit] = {}
    for unit in builds.units:
        for expression in unit.expressions:
            functions.setdefault((unit.shown, expression), unit)
    chosen = sms or targets
    return targets, _Side(functions, builds.build(None, chosen) if chosen else Build(), builds.cache)


def sass_diff(repo: Path, contract_rel: str, base_rev: str, head_rev: str | None, sms: list[str] | None,
              root: Path, jobs: int | None = None) -> SassDiff:
    """Compare every CUDA kernel instantiation of two revisions on every SM (`root`: the compile cache)."""
    jobs = jobs or default_jobs()
    head_shown = head_rev or "working tree"
    with checkout(repo, base_rev) as base_dir, checkout(repo, head_rev) as head_dir:
        head_targets, head = _build_side(head_dir, contract_rel, f"{head_shown}:{contract_rel}", sms, root, jobs)
        chosen = sms or head_targets
        if not chosen:
            base_targets, _ = _build_side(base_dir, contract_rel, f"{base_rev}:{contract_rel}", [], root, jobs)
            chosen = base_targets
        tool = find_toolchain()
        skipped = [sm for sm in chosen if not tool.builds(sm)]
        chosen = [sm for sm in chosen if tool.builds(sm)]
        _, base = _build_side(base_dir, contract_rel, f"{base_rev}:{contract_rel}", chosen, root, jobs)
        result = SassDiff(base_rev, head_shown, list(chosen), skipped=skipped, toolchain=tool.id)
        for side, name in ((base, base_rev), (head, head_shown)):
            result.failures += [f"{f.unit.shown} does not compile for {f.sm} at {name}:\n{f.log.strip()}"
                                for f in side.built.failures]
        sass = _disassemble(_needs_sass(base, head, chosen), head.cache, jobs)
        for key in sorted(set(base.functions) | set(head.functions)):
            for sm in chosen:
                result.results.append(_compare(key, sm, base, head, sass))
    return result


def _module(side: _Side, key: tuple[str, str], sm: str) -> Module | None:
    unit = side.functions.get(key)
    return side.built.module(unit, sm) if unit is not None else None


def _needs_sass(base: _Side, head: _Side, sms: list[str]) -> list[Module]:
    """Modules to disassemble: both sides of every function whose bytes differ."""
    wanted: dict[str, Module] = {}
    for key in set(base.functions) & set(head.functions):
        for sm in sms:
            a, b = _module(base, key, sm), _module(head, key, sm)
            if a is not None and b is not None and not same_bytes(a, b, key[1]):
                wanted[a.key], wanted[b.key] = a, b
    return list(wanted.values())


def _disassemble(modules: list[Module], cache: CompileCache, jobs: int) -> dict[str, dict[str, list[str]]]:
    """nvdisasm once per cubin (cached beside it), split into functions."""
    def one(module: Module) -> tuple[str, dict[str, list[str]]]:
        return module.key, disassembled(module, cache)

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(modules) or 1))) as pool:
        return dict(pool.map(one, modules))


def _compare(key: tuple[str, str], sm: str, base: _Side, head: _Side, sass: dict) -> FunctionResult:
    """The verdict for one function on one SM."""
    label, expression = key
    if key not in base.functions:
        return FunctionResult(label, expression, sm, NEW)
    if key not in head.functions:
        return FunctionResult(label, expression, sm, REMOVED)
    a, b = _module(base, key, sm), _module(head, key, sm)
    if a is None or b is None:
        return FunctionResult(label, expression, sm, BROKEN)
    if same_bytes(a, b, expression):
        return FunctionResult(label, expression, sm, SAME_BYTES)
    old = kernel_code(sass[a.key], a.lowered[expression])
    new = kernel_code(sass[b.key], b.lowered[expression])
    if old == new:
        return FunctionResult(label, expression, sm, SAME_SASS)
    diff = list(difflib.unified_diff(old, new, "base", "head", n=2, lineterm=""))[2:]
    if len(diff) > DIFF_LINES:
        diff = diff[:DIFF_LINES] + [f"... {len(diff) - DIFF_LINES} more diff lines"]
    return FunctionResult(label, expression, sm, CHANGED, ["  " + line for line in diff])
