"""Read a cubin's ELF sections and symbols: the bytes that belong to one kernel function."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

SHT_SYMTAB, SHT_NOBITS = 2, 8


@dataclass(frozen=True)
class Section:
    """One ELF section: name, type and content (empty for NOBITS, with its size kept)."""

    name: str
    kind: int
    size: int
    data: bytes


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def sections(cubin: bytes) -> tuple[list[Section], list[tuple]]:
    """(sections, symbols) of a 64-bit little-endian ELF; a symbol is (name, section index, value, size, info)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = cubin[raw[shstrndx][4]:raw[shstrndx][4] + raw[shstrndx][5]]
    found = []
    for name, kind, _flags, _addr, offset, size, *_ in raw:
        data = b"" if kind == SHT_NOBITS else cubin[offset:offset + size]
        found.append(Section(_cstr(names, name), kind, size, data))
    symbols = []
    for index, (_, kind, _f, _a, offset, size, link, _i, _al, entsize) in enumerate(raw):
        if kind != SHT_SYMTAB or not entsize:
            continue
        strings = cubin[raw[link][4]:raw[link][4] + raw[link][5]]
        for k in range(size // entsize):
            st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", cubin, offset + k * entsize)
            symbols.append((_cstr(strings, st_name), st_shndx, st_value, st_size, st_info))
    return found, symbols


def function_digest(cubin: bytes, mangled: str) -> str | None:
    """sha256 over the sections named `*.<mangled>`, the symbols in them, and every symbol name of the cubin.

    Names count because a loaded module is addressed by them (kernels and __device__/__constant__ globals); two
    functions with equal digests are the same machine code in equally named modules. None if the function is absent.
    """
    found, symbols = sections(cubin)
    mine = [i for i, s in enumerate(found) if s.name.endswith("." + mangled)]
    if not any(found[i].name == ".text." + mangled for i in mine):
        return None
    digest = hashlib.sha256()
    for i in sorted(mine, key=lambda i: found[i].name):
        section = found[i]
        digest.update(f"{section.name}\0{section.kind}\0{section.size}\0".encode() + section.data)
    for name, shndx, value, size, info in sorted(s for s in symbols if s[1] in mine):
        digest.update(f"{name}\0{found[shndx].name}\0{value}\0{size}\0{info}\0".encode())
    digest.update("\0".join(sorted({s[0] for s in symbols if s[0]})).encode())
    return digest.hexdigest()
