"""Every cubin a run's tasks will load or record, compiled once in the parent on every core before any task
starts, so workers find them in the cache instead of each compiling the units they share."""

from __future__ import annotations

import time
from pathlib import Path

from kcontract.gatetable import records_gate
from kcontract.launch.cuda import target_for
from kcontract.machine import usable_cores
from kcontract.verdict.outcome import Task
from kcontract.sassdiff.unchanged import unchanged_patches
from kcontract.toolchain.build import build
from kcontract.toolchain.built_exports import exports_sms
from kcontract.toolchain.cache import CompileCache, cache_root
from kcontract.toolchain.units import unit_of

RECORDS_GATE = records_gate().number  # compiles for every target SM; the other gates for the GPU's own


def prebuild(loaded, tasks: list[Task], device_sm: str | None) -> str | None:
    """Compile the tasks' CUDA units (every target for the records gate, the device's target otherwise); one line saying
    what was built, or None when nothing was. Failures are left to the tasks, which report them by gate; a
    control's patch that changes no machine code is a ContractError."""
    kernels = {e.name: e.kernel for e in loaded.entries} | {c.name: c.kernel for c in loaded.controls}
    units, every_target = {}, False
    for task in tasks:
        cuda = kernels[task.name].cuda
        if cuda is None:
            continue
        unit = unit_of(loaded, cuda)
        units[unit.ident] = unit
        every_target |= RECORDS_GATE in task.gates
    if not units:
        return None
    sms = list(loaded.targets) if every_target or device_sm is None else list(dict.fromkeys(
        [target_for(device_sm, loaded.targets)] + exports_sms(loaded)))  # and where the parent reads exports
    began = time.monotonic()
    built = build(list(units.values()), sms, CompileCache(cache_root(loaded.path)),
                  Path(loaded.path).resolve().parent, jobs=usable_cores())
    unchanged = unchanged_patches(loaded, built, sass=False)
    if unchanged:
        unchanged[0].others = unchanged[1:]
        raise unchanged[0]
    return (f"compile: {built.compiled + built.cached} cubins ({len(units)} sources x "
            f"{len(sms) - len(built.skipped)} SMs), {built.cached} cached, {len(built.failures)} failed, "
            f"{time.monotonic() - began:.1f} s")
