"""Patches that plant nothing: a control whose patch leaves every function's machine code as it was.

`check` compares machine code (sassdiff/machine.py: the same bytes, else the same normalised SASS), so a patch
that only edits a comment is refused although NVRTC's cubins differ in bytes; a run compares bytes alone, which
costs no disassembly and still refuses a patch that changes nothing at all.
"""

from __future__ import annotations

from kcontract.errors import ContractError
from kcontract.sassdiff.machine import same_bytes, same_machine_code
from kcontract.toolchain.build import Build
from kcontract.toolchain.cache import CompileCache, cache_root
from kcontract.toolchain.units import unit_of


def unchanged_patches(loaded, built: Build, sass: bool = True) -> list[ContractError]:
    """One error per patched control whose every symbol keeps its machine code (`sass`; else its bytes) on every
    SM both builds hold."""
    cache = CompileCache(cache_root(loaded.path))
    found = []
    for control in loaded.controls:
        cuda = control.kernel.cuda
        if cuda is None or not cuda.patch:
            continue
        try:
            mine, plain = unit_of(loaded, cuda), unit_of(loaded, cuda.model_copy(update={"patch": None}))
        except KeyError:
            continue  # the unpatched kernel is no unit of this contract: nothing built to compare with
        symbols = list(cuda.symbols.values())
        sms = [sm for sm in loaded.targets if built.module(mine, sm) and built.module(plain, sm)]

        def changed(sm: str) -> bool:
            a, b = built.module(mine, sm), built.module(plain, sm)
            if sass:
                return bool(same_machine_code(a, b, symbols, cache))
            return not all(same_bytes(a, b, s) for s in symbols)

        if sms and not any(changed(sm) for sm in sms):
            path = f"controls[{control.index}].patch"
            what = "its machine code (normalised SASS)" if sass else "its bytes"
            found.append(ContractError(loaded.path, loaded.lines.get(path), path,
                                       f"a patch that changes machine code; {cuda.patch} leaves every function of "
                                       f"{cuda.source} with {what} on {', '.join(sms)}: plant the fault where it "
                                       f"compiles to something"))
    return found
