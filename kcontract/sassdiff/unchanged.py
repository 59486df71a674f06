"""Patches that plant nothing: a control whose patch leaves every function's machine code as it was.

`check` compares machine code (sassdiff/same_code.py: the same bytes, else the same normalised SASS), so a patch
that only edits a comment is refused although NVRTC's cubins differ in bytes; a run compares bytes alone, which
costs no disassembly and still refuses a patch that changes nothing at all. Only modules already built are
compared, the SMs with the largest cubins first (where code differs soonest), the controls on every core.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kcontract.errors import ContractError
from kcontract.capacity import usable_cores
from kcontract.sassdiff.same_code import same_bytes, same_machine_code


def unchanged_patches(loaded, builds, sass: bool = True) -> list[ContractError]:
    """One error per patched control whose every symbol keeps its machine code (`sass`; else its bytes) on every
    target SM: one that changes nothing on the SMs `builds` (kcontract.builds.builds.Builds) holds is built for
    the others and judged again, so a refusal names them all."""
    unchanged = unchanged_controls(loaded, builds, sass)
    if unchanged:
        builds.build([control.kernel.compiled for control, _ in unchanged], loaded.targets)
        unchanged = unchanged_controls(loaded, builds, sass, {control.name for control, _ in unchanged})
    return [refusal(loaded, control, sms, sass) for control, sms in unchanged]


def unchanged_controls(loaded, builds, sass: bool = True, names: set[str] | None = None) -> list[tuple]:
    """(control, SMs) per patched control (of `names`, default every one) whose every symbol keeps its machine
    code (`sass`; else its bytes) on each SM `builds` holds both modules of, those SMs in the contract's order."""
    pairs = []
    for control in loaded.controls:
        if names is not None and control.name not in names:
            continue
        compiled = control.kernel.compiled
        if compiled is None or not compiled.patch:
            continue
        try:
            plain = compiled.model_copy(update={"patch": None})
            builds.unit(plain)
        except KeyError:
            continue  # the unpatched kernel is no unit of this contract: nothing built to compare with
        held = {sm: (builds.held(compiled, sm), builds.held(plain, sm)) for sm in loaded.targets}
        held = {sm: pair for sm, pair in held.items() if pair[0] and pair[1]}
        if held:
            pairs.append((control, held))
    with ThreadPoolExecutor(max_workers=max(1, min(usable_cores(), len(pairs) or 1))) as pool:
        kept = dict(pool.map(lambda item: (item[0].name, not _changes(item[0].kernel.compiled, item[1], builds, sass)),
                             _by_turns(pairs)))
    return [(control, sorted(held, key=loaded.targets.index)) for control, held in pairs if kept[control.name]]


def _by_turns(pairs: list) -> list:
    """The controls one source at a time in turn, so that workers do not wait on one source's disassembly."""
    by_source: dict[str, list] = {}
    for pair in pairs:
        by_source.setdefault(pair[0].kernel.compiled.source, []).append(pair)
    queues = list(by_source.values())
    return [queue[i] for i in range(max(map(len, queues), default=0)) for queue in queues if i < len(queue)]


def _changes(compiled, held: dict, builds, sass: bool) -> bool:
    """Whether the patch changes some symbol's machine code (`sass`; else its bytes) on some SM, looking first
    where the patched cubin is largest."""
    symbols = list(compiled.symbols.values())
    for sm in sorted(held, key=lambda sm: -Path(held[sm][0].cubin_path).stat().st_size):
        a, b = held[sm]
        if sass and same_machine_code(a, b, symbols, builds.cache):
            return True
        if not sass and not all(same_bytes(a, b, s) for s in symbols):
            return True
    return False


def refusal(loaded, control, sms: list[str], sass: bool) -> ContractError:
    """The error that refuses a control's patch that changes nothing on `sms`."""
    compiled = control.kernel.compiled
    path = f"controls[{control.index}].patch"
    what = "its machine code (normalised SASS)" if sass else "its bytes"
    return ContractError(loaded.path, loaded.lines.get(path), path,
                         f"a patch that changes machine code; {compiled.patch} leaves every function of "
                         f"{compiled.source} with {what} on {', '.join(sms)}: plant the fault where it compiles to "
                         f"something")
