"""`check --recompile`: every module compiled afresh, judged against what the cache held under the same key.

A key covers everything NVRTC is given, so a cached module should be what compiling its inputs gives. The bytes
are, but for the names NVRTC gives internal-linkage symbols (an exported constant, a function in an unnamed
namespace), which carry the id of the process that compiled them: a module is bit-identical, or the same in every
section and symbol but for that id (sassdiff/elf.py), else its symbols are compared as machine code
(sassdiff/same_code.py: normalised SASS). Only a module whose lowered names or machine code differ is unlike the
cache; the fresh one then takes its place there.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.capacity import usable_cores
from kcontract.sassdiff.elf import same_but_process_ids, without_process_ids
from kcontract.sassdiff.same_code import same_machine_code

IDENTICAL, NAMES, MACHINE_CODE, NEW, UNLIKE = "identical", "names", "machine code", "new", "unlike"


@dataclass
class Recompiled:
    """How each recompiled module compares with the cache's."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys((IDENTICAL, NAMES, MACHINE_CODE, NEW,
                                                                           UNLIKE), 0))
    unlike: list[str] = field(default_factory=list)  # a line per module unlike the cache's

    def text(self) -> str:
        """`280 recompiled: 0 bit-identical, 280 the same but for internal names, ...`."""
        n = self.counts
        return (f"{sum(n.values())} recompiled: {n[IDENTICAL]} bit-identical, {n[NAMES]} the same but for internal "
                f"symbols' process ids, {n[MACHINE_CODE]} the same machine code, {n[NEW]} new to the cache, "
                f"{n[UNLIKE]} unlike the cache")


def judge_recompiled(builds) -> Recompiled:
    """Each module `builds` (kcontract.builds.builds.Builds, made with `recompile`) compiled, against the cache's;
    a module the cache lacked, or held otherwise, is put there."""
    pairs = builds.recompiled()
    with ThreadPoolExecutor(max_workers=max(1, usable_cores())) as pool:
        verdicts = list(pool.map(lambda pair: _verdict(*pair, builds), pairs))
    found = Recompiled()
    for (fresh, cached), verdict in zip(pairs, verdicts):
        found.counts[verdict] += 1
        if verdict == UNLIKE:
            what = "its lowered names differ" if _names(cached.lowered) != _names(fresh.lowered) else \
                "its machine code differs"
            found.unlike.append(f"{fresh.unit.shown} on {fresh.sm}: recompiled, it is not what the cache held under "
                                f"its key ({fresh.key[:12]}): {what}; the fresh module replaced it")
        if verdict in (UNLIKE, NEW):
            builds.adopt(fresh)
    return found


def _names(lowered: dict[str, str]) -> dict[str, str]:
    """Lowered names as any process compiling the same inputs gives them."""
    return {expression: without_process_ids(name) for expression, name in lowered.items()}


def _verdict(fresh, cached, builds) -> str:
    """IDENTICAL, NAMES, MACHINE_CODE, NEW or UNLIKE for one recompiled module."""
    if cached is None:
        return NEW
    a, b = Path(fresh.cubin_path).read_bytes(), Path(cached.cubin_path).read_bytes()
    if a == b:
        return IDENTICAL
    if _names(fresh.lowered) != _names(cached.lowered):
        return UNLIKE
    try:
        if same_but_process_ids(a, b):
            return NAMES
    except ValueError:  # the cache's bytes are no readable cubin
        return UNLIKE
    changed = same_machine_code(fresh, cached, fresh.unit.expressions, builds.cache, builds.cuda.trusted)
    return UNLIKE if changed else MACHINE_CODE
