"""The machine, checked once before any gate runs: what every task would need, in a few seconds.

A problem that would fail every entry (no GPU for a GPU contract, a CuPy that cannot run, no NVRTC, a GPU the
toolchain cannot build for, no writable cache folder) is one EnvironmentProblem, exit 3; an output path that
cannot be written is a UsageError, exit 2. What it found comes back as lines for the front door to say. Every
command checks the machine through its session (`Session.machine`), the one caller of `check_machine`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.cachedir import CACHE_ENV, resolve_root, writable
from kcontract.errors import EnvironmentProblem, UsageError
from kcontract.toolchain.locate import Toolchain, find_toolchain
from kcontract.toolchain.tools import find_tool


@dataclass
class Ready:
    """What the checks found: the toolchain (when CUDA kernels are compiled), the GPU's SM, and the lines to say
    (the toolchain, the tools, notes)."""

    toolchain: Toolchain | None = None
    sm: str | None = None
    notes: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def said(self, quiet: bool = False) -> list[str]:
        """The lines to say; `quiet`: only the notes that a folder was made."""
        return [line for line in self.lines if not quiet or line.startswith("note: created ")]


def device_sm() -> str:
    """`sm_90` of device 0 (CuPy has been checked)."""
    import cupy

    return f"sm_{cupy.cuda.Device(0).compute_capability}"


def check_machine(loaded, contract_path: str, *, cuda: bool, gpu: bool, outputs: dict[str, str | None] | None = None,
                  names: list[str] = (), tools: tuple[str, ...] = ()) -> Ready:
    """Check outputs, the cache folder, the toolchain (`cuda`: CUDA kernels compile), the disassemblers a command
    needs (`tools`) and the GPU (`gpu`)."""
    ready = Ready()
    created = require_writable(**(outputs or {}))
    root, note = resolve_root(contract_path)
    if note:
        os.environ[CACHE_ENV] = str(root)  # workers and later steps use the same folder
        ready.notes.append(note)
    if cuda:
        ready.toolchain = find_toolchain()
    found = [find_tool(name) for name in tools]
    if gpu:
        ready.sm = _check_gpu(loaded, contract_path, ready.toolchain, names)
    ready.lines = [f"note: {line}" for line in created]
    if ready.toolchain is not None:
        ready.lines.append(f"toolchain: {ready.toolchain.describe()}")
    ready.lines += [f"{tool.name}: {tool.version} ({tool.origin})" for tool in found]
    ready.lines += [f"note: {line}" for line in ready.notes]
    return ready


def _check_gpu(loaded, contract_path: str, toolchain: Toolchain | None, names: list[str]) -> str:
    """The GPU's SM, once CuPy runs and (where CUDA kernels compile) the toolchain builds for a target of it."""
    from kcontract.launch import cuda_ready
    from kcontract.launch.cuda import target_for

    cuda_ready(list(names) or ["the contract's kernels"])
    sm = device_sm()
    if toolchain is None:
        return sm
    target = target_for(sm, loaded.targets)
    if target not in loaded.targets:
        raise EnvironmentProblem(f"this GPU is {sm}, which is none of the contract's targets "
                                 f"({', '.join(loaded.targets)}): add {sm} to `targets` in {contract_path}")
    if not toolchain.builds(target):
        raise EnvironmentProblem(f"nvrtc {toolchain.nvrtc.version} ({toolchain.nvrtc.origin}) cannot build for this "
                                 f"GPU ({sm}): install a newer NVRTC (pip install 'kcontract[cu13]')")
    return sm


def device_target(loaded) -> str:
    """The contract's target for this GPU's SM (`sm_90a` where the targets name it); without a GPU, a usage error."""
    import kcontract.launch
    from kcontract.launch.cuda import target_for

    why = kcontract.launch.gpu_problem()
    if why is not None:
        raise UsageError(f"--sm: no GPU here to take the SM from ({why}); name the SM whose machine code decides "
                         f"equivalence (or is instrumented), one of the contract's targets: {', '.join(loaded.targets)}")
    return target_for(device_sm(), list(loaded.targets))


def require_writable(**paths: str | None) -> list[str]:
    """Refuse, before any work, an output path that cannot be written (`--json x/y` under a file, a path in
    /proc), each keyword the option's name (`emit_contract` for `--emit-contract`); a missing folder is made, and a
    note returned that says so."""
    return [note for option, path in paths.items() if path
            for note in [_require_one(f"--{option.replace('_', '-')}", path)] if note]


def _require_one(flag: str, path: str) -> str | None:
    """Refuse one output path that cannot be written; the note that its folder was made, or None."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    parent = target.parent
    missing = [p for p in (parent, *parent.parents) if not p.exists()]
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{flag} {path}: cannot create its folder {parent} ({error.strerror})") from None
    why = writable(parent)
    if why is not None or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable ({why or 'permission denied'}); give another path")
    return f"created {missing[-1]} for {flag}" if missing else None
