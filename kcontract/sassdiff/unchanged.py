"""Patches that plant nothing: a control whose patch leaves every function's machine code as it was."""

from __future__ import annotations

from pathlib import Path

from kcontract.errors import ContractError
from kcontract.sassdiff.elf import function_digest
from kcontract.toolchain.build import Build
from kcontract.toolchain.units import unit_of


def unchanged_patches(loaded, built: Build) -> list[ContractError]:
    """One error per patched control whose every symbol keeps its bytes on every SM both builds hold."""
    found = []
    for control in loaded.controls:
        cuda = control.kernel.cuda
        if cuda is None or not cuda.patch:
            continue
        try:
            mine, plain = unit_of(loaded, cuda), unit_of(loaded, cuda.model_copy(update={"patch": None}))
        except KeyError:
            continue  # the unpatched kernel is no unit of this contract: nothing built to compare with
        sms = [sm for sm in loaded.targets if built.module(mine, sm) and built.module(plain, sm)]
        if sms and all(_same(built.module(mine, sm), built.module(plain, sm), cuda.symbols.values()) for sm in sms):
            path = f"controls[{control.index}].patch"
            found.append(ContractError(loaded.path, loaded.lines.get(path), path,
                                       f"a patch that changes machine code; {cuda.patch} leaves every function of "
                                       f"{cuda.source} with its bytes on {', '.join(sms)}: plant the fault where it "
                                       f"compiles to something"))
    return found


def _same(a, b, expressions) -> bool:
    """Whether each named function has the same bytes in both modules."""
    cubins = Path(a.cubin_path).read_bytes(), Path(b.cubin_path).read_bytes()
    return all(function_digest(cubins[0], a.lowered[e]) == function_digest(cubins[1], b.lowered[e])
               for e in expressions)
