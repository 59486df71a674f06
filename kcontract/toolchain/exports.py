"""Integers a kernel source exports for the checker, read back from its cubin.

A kernel states what kcontract needs to know about it (its launch's dynamic shared memory on the SM it compiles
for, how many chains it sums in) as `__constant__` (or `__device__`) variable templates, e.g.

    template <int D, int G>
    __constant__ const int kExportPvKeyGroups = +kKeyGroups<D, G>;

A compile unit names each instance it needs as a name expression, `&wd::kExportPvKeyGroups<128, 4>`, in
`Unit.exports`: NVRTC instantiates it and gives its mangled name (kept with the cubin in the cache's metadata, as
`Module.lowered`), and this module finds that symbol in the cubin's ELF symbol table and reads its initial value
from its section: a 4- or 8-byte little-endian signed integer.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from kcontract.errors import KContractError
from kcontract.exitcodes import ExitCode

SIZES = (4, 8)  # bytes of an exported integer: int or long long
_LORESERVE = 0xFF00  # SHN_LORESERVE: a st_shndx from here on names no section (SHN_ABS, SHN_COMMON, SHN_XINDEX)


class ExportError(KContractError):
    """An exported variable the cubin does not hold, or holds in a form that is no integer's initial value."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, mangled: str = ""):
        super().__init__(message)
        self.mangled = mangled


def name_expression(variable: str) -> str:
    """The NVRTC name expression of an exported variable: `wd::kX<128, 4>` -> `&wd::kX<128, 4>` (kept if given so)."""
    variable = variable.strip()
    return variable if variable.startswith("&") else "&" + variable


def read_exports(cubin: bytes, mangled: Iterable[str]) -> dict[str, int]:
    """The value of each named variable (mangled, as NVRTC lowered it) in a cubin; ExportError names the first
    that is absent, has no initial value in the cubin (a NOBITS section: zero-initialised or uninitialised) or is
    not 4 or 8 bytes long."""
    wanted = list(dict.fromkeys(mangled))
    if cubin[:4] != b"\x7fELF":
        raise ExportError("not an ELF cubin")
    try:
        elf = ELFFile(io.BytesIO(cubin))
        names, found = set(wanted), {}
        for table in elf.iter_sections(type="SHT_SYMTAB"):
            for symbol in table.iter_symbols():
                if symbol.name in names and symbol.name not in found and symbol["st_shndx"] != "SHN_UNDEF":
                    found[symbol.name] = symbol
        return {name: _value(elf, found.get(name), name) for name in wanted}
    except ELFError as error:
        raise ExportError(f"the cubin's ELF cannot be read ({error})") from None


def read_export(cubin: bytes, mangled: str) -> int:
    """The value of one exported variable (its mangled name) in a cubin; see `read_exports`."""
    return read_exports(cubin, [mangled])[mangled]


def module_exports(module, expressions: Iterable[str]) -> dict[str, int]:
    """Each exported variable's value in a built module (toolchain.build.Module, or anything with `cubin_path`,
    `lowered` and `sm`), by the name expression its unit named in `exports`."""
    expressions = [name_expression(e) for e in expressions]
    missing = [e for e in expressions if e not in module.lowered]
    if missing:
        raise ExportError(f"{missing[0]} was not compiled into this module for {module.sm}: name it in the compile "
                          f"unit's exports")
    values = read_exports(Path(module.cubin_path).read_bytes(), [module.lowered[e] for e in expressions])
    return {e: values[module.lowered[e]] for e in expressions}


def kernel_exports(module, kernel) -> dict[str, int]:
    """A CUDA kernel reference's `exports` (name -> variable) as values in a module built for one SM."""
    values = module_exports(module, kernel.exports.values())
    return {name: values[name_expression(variable)] for name, variable in kernel.exports.items()}


def _value(elf, symbol, name: str) -> int:
    """The initial value of one variable's symbol."""
    if symbol is None:
        raise ExportError(f"{name} is not defined in the cubin's symbol table (is it a __constant__ or __device__ "
                          f"variable, and its name expression one of the unit's exports?)", name)
    if symbol["st_info"]["type"] != "STT_OBJECT":
        raise ExportError(f"{name} is a {symbol['st_info']['type']} symbol, not a variable", name)
    index, size, offset = symbol["st_shndx"], symbol["st_size"], symbol["st_value"]
    if not isinstance(index, int) or index >= _LORESERVE:  # pyelftools names SHN_ABS and SHN_COMMON
        raise ExportError(f"{name} lies in no section of the cubin (section index {index})", name)
    if size not in SIZES:
        raise ExportError(f"{name} is {size} bytes long; an exported integer is 4 or 8 bytes", name)
    section = elf.get_section(index)
    if section["sh_type"] == "SHT_NOBITS":
        raise ExportError(f"{name} lies in {section.name}, a NOBITS section: the cubin holds no initial value for "
                          f"it (initialise it with a constant expression)", name)
    data = section.data()
    if offset + size > len(data):
        raise ExportError(f"{name} ({size} bytes at {offset}) runs past the end of {section.name} ({len(data)} "
                          f"bytes)", name)
    return int.from_bytes(data[offset:offset + size], "little", signed=True)
