"""Whether two builds of a function have the same machine code: the same bytes, else the same normalised SASS.

NVRTC's cubins differ in bytes when only a comment of the source changed, or another instantiation joined the
file, so bytes alone cannot say that the machine code is unchanged; normalised SASS (sassdiff/normalise.py) can.
Both compare a kernel symbol together with every function it calls. Every place that decides "changes the
machine code" asks here.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from kcontract.sassdiff.elf import digest_of, sections
from kcontract.sassdiff.normalise import kernel_code, split_functions
from kcontract.toolchain.build import Module
from kcontract.toolchain.cache import CompileCache
from kcontract.toolchain.tools import run_tool

SASS_FILE = "sass.txt"  # nvdisasm's text of a cubin, kept beside it in the compile cache
_DISASSEMBLING: dict[str, threading.Lock] = {}  # one nvdisasm per cubin at a time


def disassembled(module: Module, cache: CompileCache) -> dict[str, list[str]]:
    """The module's SASS by mangled function name: nvdisasm once per cubin (threads asking for the same one wait
    for it), its text cached beside it and split once per process."""
    with _DISASSEMBLING.setdefault(module.key, threading.Lock()):
        return _split(module.key, str(module.cubin_path), cache)


@functools.lru_cache(maxsize=64)
def _split(key: str, cubin_path: str, cache: CompileCache) -> dict[str, list[str]]:
    """A cubin's SASS split into functions (its key is its content, so keeping it by key is safe)."""
    text = cache.text(key, SASS_FILE)
    if text is None:
        text = run_tool("nvdisasm", ["-c", cubin_path])
        cache.put_text(key, SASS_FILE, text)
    return split_functions(text)


@functools.lru_cache(maxsize=4096)
def _digest(cubin_path: str, mangled: str) -> str | None:
    """A function's bytes digest; cubin paths are content-addressed, so caching by path is safe."""
    return digest_of(_sections(cubin_path), mangled)


@functools.lru_cache(maxsize=64)
def _sections(cubin_path: str) -> tuple[list, list[tuple]]:
    """A cubin's sections and symbols, read once per process (its path is its content)."""
    return sections(Path(cubin_path).read_bytes())


def same_bytes(a: Module, b: Module, expression: str) -> bool:
    """Whether the function has the same bytes in both modules."""
    return _digest(str(a.cubin_path), a.lowered[expression]) == _digest(str(b.cubin_path), b.lowered[expression])


def normalised(module: Module, expression: str, cache: CompileCache) -> list[str]:
    """The function's normalised SASS in a module, with the functions it calls."""
    return kernel_code(disassembled(module, cache), module.lowered[expression])


def same_machine_code(a: Module, b: Module, expressions, cache: CompileCache,
                      cache_b: CompileCache | None = None) -> list[str]:
    """The expressions whose machine code differs between the two modules (empty: all the same); a function
    whose bytes differ is disassembled (nvdisasm) and compared as normalised SASS (`cache_b`: where `b`'s SASS is
    kept, when not in `cache`)."""
    return [e for e in expressions
            if not same_bytes(a, b, e) and normalised(a, e, cache) != normalised(b, e, cache_b or cache)]
