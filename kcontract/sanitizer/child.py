"""One sanitized launch: `python -m kcontract.sanitizer.child CONTRACT entry|control NAME CASE` runs the kernel
on the case's realistic-suite call once (outputs poisoned, inputs from the run's cache) and exits 0, or 1 on a failure."""

from __future__ import annotations

import sys

from kcontract.builds.builds import Builds
from kcontract.contract.loader import load_contract
from kcontract.gatetable import Suite
from kcontract.launch import launcher_for
from kcontract.launch.base import KernelFailure
from kcontract.refcache import ReferenceCache, reference_root


def main(argv: list[str]) -> int:
    contract, kind, name, case = argv
    _own_allocations()
    loaded = load_contract(contract)
    control = loaded.control(name) if kind == "control" else None
    entry = loaded.entry(control.entry if control else name)
    family = entry.fresh_family(loaded.seed)
    kernel, builds = control.kernel if control else entry.kernel, Builds.of(loaded)
    family.exports = builds.family_exports(entry.kernel.compiled, family)
    family.store = ReferenceCache(reference_root(contract))
    launcher = launcher_for(kernel, loaded, entry, _build(builds, loaded, entry, kernel))
    try:
        for checked in family.checks(Suite.REALISTIC, case):
            launcher.run(checked.problem)
    except KernelFailure as failure:
        print(f"kcontract: {failure.message}", file=sys.stderr)
        return 1
    finally:
        launcher.close()
    return 0


def _build(builds: Builds, loaded, entry, kernel):
    """A CUDA kernel's build for this GPU (a Python kernel has none)."""
    if kernel.compiled is None:
        return None
    import cupy

    from kcontract.launch.cuda import device_sm, target_for

    return builds.kernel(kernel.compiled, [target_for(device_sm(cupy), list(loaded.targets))], entry.kernel.compiled)


def _own_allocations() -> None:
    """Every array in an allocation of its own (CuPy's pool off), so the sanitizer knows where each one ends."""
    import cupy

    cupy.cuda.set_allocator(None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
