"""Split nvdisasm output into functions and keep only machine code: opcodes, operands, registers, constants.

What the compiler numbers module-wide (branch labels `.L_x_N`, internal functions `$__internal_N_$name`) moves
with unrelated code, such as another instantiation in the same file; both are renumbered per kernel symbol by
first use. A kernel symbol's code is its own section and every function it calls in a section of its own.
"""

from __future__ import annotations

import re

_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
_OFFSET = re.compile(r"/\*[0-9a-fA-F]{4,}\*/")  # /*0040*/ instruction offsets
_COMMENT = re.compile(r"/\*.*?\*/")  # encodings and other comments
_LABEL = re.compile(r"\.L_x_\d+")
_LABEL_DEF = re.compile(r"^(\.L_x_\d+):$")
_INTERNAL = re.compile(r"\$__internal_(\d+)_\$")  # the compiler's module-wide number of an internal function
_FUNCTION_DEF = re.compile(r"^\$\S+:$")  # the start of a function placed in the kernel's section
_CALL = re.compile(r"\bCALL\.\S*\s+`\(([^)`]+)\)")  # a call's target, by name
_BRANCHES = ("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "BSSY", "BREAK", "SSY", "PBK", "PCNT", "CAL", "JCAL")
_OPCODE = re.compile(r"^(?:@!?U?P\w+\s+)?(\S+)")
_HEX = re.compile(r"(?<![\w\[])0x[0-9a-fA-F]+(?![\w\]])")


class _Numbers:
    """First-use numbers of one kernel symbol's labels (L0, L1, ...) and internal functions (F0, F1, ...)."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.internal: dict[str, str] = {}

    def label(self, match: re.Match) -> str:
        return self.labels.setdefault(match.group(0), f"L{len(self.labels)}")

    def function(self, match: re.Match) -> str:
        return f"$__internal_{self.internal.setdefault(match.group(1), f'F{len(self.internal)}')}_$"


def split_functions(sass: str) -> dict[str, list[str]]:
    """nvdisasm text -> {mangled name: its lines}, one entry per `.text.<name>` section."""
    functions: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        if m := _SECTION.match(line):
            current = m.group(1)
            functions[current] = []
        elif line.lstrip().startswith("//"):
            current = None
        elif current is not None:
            functions[current].append(line)
    return functions


def normalise(lines: list[str], name: str = "", numbers: _Numbers | None = None) -> list[str]:
    """Machine code only: no offsets, encodings, directives or padding; labels and internal functions renumbered
    by first use (`numbers`: shared with the other sections of the same kernel symbol)."""
    numbers = numbers or _Numbers()
    out: list[str] = []
    for raw in lines:
        text = _COMMENT.sub(" ", _OFFSET.sub(" ", raw)).strip()
        if not text or text.startswith(".") and not _LABEL_DEF.match(text) or text in (f"{name}:", f".text.{name}:"):
            continue
        if text.endswith(":") and not _LABEL_DEF.match(text) and not _FUNCTION_DEF.match(text):
            continue  # other symbol labels
        text = re.sub(r"\s*;\s*$", "", text)
        text = _INTERNAL.sub(numbers.function, _LABEL.sub(numbers.label, re.sub(r"\s+", " ", text)))
        opcode = _OPCODE.match(text).group(1)
        if opcode.split(".", 1)[0] in _BRANCHES:
            text = _HEX.sub("<addr>", text)
        out.append(text)
    while out and (out[-1] == "NOP" or out[-1].endswith(":")):
        out.pop()  # padding after the last instruction, and the end-of-function label
    return out


def kernel_code(functions: dict[str, list[str]], name: str) -> list[str]:
    """A kernel symbol's normalised code: its section, then each function it calls (directly or not) that has a
    section of its own, headed `section NAME:`, in order of first call; one numbering over them all."""
    numbers = _Numbers()
    out = normalise(functions.get(name, []), name, numbers)
    done, todo = {name}, _called(functions, functions.get(name, []), {name})
    while todo:
        callee = todo.pop(0)
        done.add(callee)
        out += [f"section {_INTERNAL.sub(numbers.function, callee)}:",
                *normalise(functions[callee], callee, numbers)]
        todo += [c for c in _called(functions, functions[callee], done) if c not in todo]
    return out


def _called(functions: dict[str, list[str]], lines: list[str], done: set[str]) -> list[str]:
    """Functions with sections of their own that these lines call, in order of first call, leaving out `done`."""
    found: list[str] = []
    for line in lines:
        for target in _CALL.findall(line):
            if target in functions and target not in done and target not in found:
                found.append(target)
    return found
