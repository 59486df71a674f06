"""Every cubin a run's tasks will load or record, compiled once in the parent on every core before any task
starts, through the session's `Builds`, so the jobs carry them built and no worker compiles."""

from __future__ import annotations

import time

from kcontract.gatetable import records_gate
from kcontract.launch.cuda import target_for
from kcontract.sassdiff.unchanged import unchanged_patches
from kcontract.sms import first_sm
from kcontract.verdict.summary import plural
from kcontract.verdict.outcome import Task

RECORDS_GATE = records_gate().number  # compiles for every target SM; the other gates for the GPU's own or the first


def prebuild(loaded, builds, tasks: list[Task], device_sm: str | None) -> str | None:
    """Compile the tasks' CUDA and Triton units through `builds` (kcontract.builds.builds.Builds): for every target
    those of the records gate's tasks, the others for the device's target (with no GPU, the first SM:
    kcontract.sms.first_sm) and an entry's for the SM the parent reads exports from; one line saying what was built,
    or None when nothing was. Failures are left to the tasks, which report them by gate; a control's patch that
    changes no machine code is a ContractError."""
    needs = _needs(loaded, builds, tasks, device_sm)
    if not needs:
        return None
    began = time.monotonic()
    asks = [([compiled], [sm for sm in loaded.targets if sm in sms]) for compiled, sms in needs.values()]
    built = builds.build_each(asks)
    unchanged = unchanged_patches(loaded, builds, sass=False)
    if unchanged:
        unchanged[0].others = unchanged[1:]
        raise unchanged[0]
    most = max(len(set(sms) - set(built.skipped)) for _, sms in asks)
    return (f"compile: {plural(built.compiled + built.cached, 'cubin')} ({plural(len(needs), 'source')} on up to "
            f"{plural(most, 'SM')}), "
            f"{built.cached} cached, {len(built.failures)} failed, {time.monotonic() - began:.1f} s")


def _needs(loaded, builds, tasks: list[Task], device_sm: str | None) -> dict[tuple, tuple[object, set[str]]]:
    """Each compiled unit the tasks load, by ident: one of its kernels and the SMs it is needed for."""
    kernels = {e.name: e.kernel for e in loaded.entries} | {c.name: c.kernel for c in loaded.controls}
    own = [first_sm(loaded.targets) if device_sm is None else target_for(device_sm, loaded.targets)]
    needs: dict[tuple, tuple[object, set[str]]] = {}
    for task in tasks:
        compiled = kernels[task.name].compiled
        if compiled is None:
            continue
        exports = builds.exports_sms() if task.kind == "entry" else []  # a control's job takes its entry's exports
        wanted = loaded.targets if RECORDS_GATE in task.gates else own + exports
        needs.setdefault(builds.unit(compiled).ident, (compiled, set()))[1].update(wanted)
    return needs
