"""Read a cubin's ELF sections and symbols (with pyelftools): the bytes that belong to one kernel function."""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf import enums
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

SHT_SYMTAB, SHT_NOBITS = 2, 8
TEXT = ".text."  # a function's code section: `.text.<mangled>`
# an internal-linkage name as NVRTC mangles it: `_ZN45_INTERNAL_00000000_9_matmul_cu_1f59a11b_267452mm...`, the
# digits after the path's hash the compiling process's id (then the next name's length), the leading length counting it
_INTERNAL = re.compile(r"\d*(_INTERNAL_[0-9a-f]{8}_\d+_[A-Za-z0-9_]+?_[0-9a-f]{8}_)\d+")

# pyelftools gives known enum values by name; these turn them back into the numbers the ELF file holds (names are
# unique across its machine-specific section types, so one table serves every e_machine)
_SH_TYPES = {name: value for table in (enums.ENUM_SH_TYPE_BASE, enums.ENUM_SH_TYPE_ARM, enums.ENUM_SH_TYPE_AARCH64,
                                       enums.ENUM_SH_TYPE_AMD64, enums.ENUM_SH_TYPE_MIPS, enums.ENUM_SH_TYPE_RISCV)
             for name, value in table.items() if isinstance(value, int)}


def _number(value: int | str, table: dict) -> int:
    """The number behind a field pyelftools parsed as an enum (unknown values stay numbers)."""
    return value if isinstance(value, int) else table[value]


@dataclass(frozen=True)
class Section:
    """One ELF section: name, type and content (empty for NOBITS, with its size kept); for a relocation section,
    the sections of the functions its relocations name."""

    name: str
    kind: int
    size: int
    data: bytes
    functions: tuple[int, ...] = ()


def _open_elf(cubin: bytes) -> ELFFile:
    """A 64-bit little-endian ELF (a cubin) opened with pyelftools; anything else raises ValueError."""
    if cubin[:4] != b"\x7fELF" or len(cubin) < 6 or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF cubin")
    try:
        return ELFFile(io.BytesIO(cubin))
    except ELFError as error:
        raise ValueError(f"not a readable ELF cubin: {error}") from None


def _section_kind(section) -> int:
    """A pyelftools section's sh_type as a number."""
    return _number(section["sh_type"], _SH_TYPES)


def _symbol_info(symbol) -> int:
    """A pyelftools symbol's st_info byte: bind in the high nibble, type in the low one."""
    info = symbol["st_info"]
    return (_number(info["bind"], enums.ENUM_ST_INFO_BIND) << 4) | _number(info["type"], enums.ENUM_ST_INFO_TYPE)


def _symbol_section(symbol) -> int:
    """A pyelftools symbol's st_shndx as a number (SHN_UNDEF 0, SHN_ABS 0xfff1, ...)."""
    return _number(symbol["st_shndx"], enums.ENUM_ST_SHNDX)


def _relocated_functions(elf: ELFFile, section) -> tuple[int, ...]:
    """The section indices of the function symbols a relocation section's entries name (none for others)."""
    if not isinstance(section, RelocationSection):
        return ()
    symtab = elf.get_section(section["sh_link"])
    if not hasattr(symtab, "get_symbol"):
        raise ValueError(f"not a readable ELF cubin: {section.name} links to no symbol table")
    found = []
    for relocation in section.iter_relocations():
        symbol = symtab.get_symbol(relocation["r_info_sym"])
        if symbol["st_info"]["type"] == "STT_FUNC" and isinstance(symbol["st_shndx"], int):
            found.append(symbol["st_shndx"])
    return tuple(dict.fromkeys(found))


def sections(cubin: bytes) -> tuple[list[Section], list[tuple]]:
    """(sections, symbols) of a 64-bit little-endian ELF; a symbol is (name, section index, value, size, info)."""
    elf = _open_elf(cubin)
    found, symbols = [], []
    try:
        for section in elf.iter_sections():
            kind, size = _section_kind(section), section["sh_size"]
            if kind == SHT_NOBITS:
                data = b""
            elif section.compressed:  # the bytes as stored, as for every other section
                data = cubin[section["sh_offset"]:section["sh_offset"] + size]
            else:
                data = section.data()
            found.append(Section(section.name, kind, size, data, _relocated_functions(elf, section)))
            if kind != SHT_SYMTAB or not section["sh_entsize"]:
                continue
            for symbol in section.iter_symbols():
                symbols.append((symbol.name, _symbol_section(symbol), symbol["st_value"], symbol["st_size"],
                                _symbol_info(symbol)))
    except ELFError as error:
        raise ValueError(f"not a readable ELF cubin: {error}") from None
    return found, symbols


def _reached(found: list[Section], mangled: str) -> list[str]:
    """The function and every function with a code section of its own that its relocations name, transitively
    (a call into another section is relocated; a call within one is not, and its callee's code is already there)."""
    reached, todo = [], [mangled]
    while todo:
        name = todo.pop(0)
        if name in reached:
            continue
        reached.append(name)
        for section in found:
            if section.functions and section.name.endswith(TEXT + name):
                todo += [found[i].name[len(TEXT):] for i in section.functions
                         if i < len(found) and found[i].name.startswith(TEXT)]
    return reached


def digest_of(parsed: tuple[list[Section], list[tuple]], mangled: str) -> str | None:
    """sha256 over the sections named `*.<name>` of the function and of every function it calls in a section of its
    own, the symbols in them, and every symbol name of the cubin (`parsed`: its sections and symbols as `sections`
    read them).

    Names count because a loaded module is addressed by them (kernels and __device__/__constant__ globals); two
    functions with equal digests are the same machine code in equally named modules. None if the function is absent.
    """
    found, symbols = parsed
    if not any(s.name == TEXT + mangled for s in found):
        return None
    names = _reached(found, mangled)
    mine = [i for i, s in enumerate(found) if any(s.name.endswith("." + name) for name in names)]
    digest = hashlib.sha256()
    for i in sorted(mine, key=lambda i: found[i].name):
        section = found[i]
        digest.update(f"{section.name}\0{section.kind}\0{section.size}\0".encode() + section.data)
    for name, shndx, value, size, info in sorted(s for s in symbols if s[1] in mine):
        digest.update(f"{name}\0{found[shndx].name}\0{value}\0{size}\0{info}\0".encode())
    digest.update("\0".join(sorted({s[0] for s in symbols if s[0]})).encode())
    return digest.hexdigest()


def without_process_ids(name: str) -> str:
    """A symbol name with the compiling process's id (and the lengths that count it) left out of its internal-linkage
    parts: two compiles of the same inputs give the same name."""
    return _INTERNAL.sub(r"#\1#", name)


def same_but_process_ids(a: bytes, b: bytes) -> bool:
    """Whether two cubins hold the same sections and symbols, byte for byte, but for the process id NVRTC puts in
    internal-linkage names (so two compiles of the same inputs in two processes differ there and nowhere else)."""
    (found_a, symbols_a), (found_b, symbols_b) = sections(a), sections(b)
    names = (".strtab", ".symtab")

    def kept(found: list[Section]) -> list[tuple]:
        return [(without_process_ids(s.name), s.kind, s.size, s.data, s.functions) for s in found
                if s.name not in names]

    if kept(found_a) != kept(found_b):
        return False
    return [(without_process_ids(n), *rest) for n, *rest in symbols_a] == \
        [(without_process_ids(n), *rest) for n, *rest in symbols_b]
