"""Split nvdisasm output into functions and keep only machine code: opcodes, operands, registers, constants."""

from __future__ import annotations

import re

_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
_OFFSET = re.compile(r"/\*[0-9a-fA-F]{4,}\*/")  # /*0040*/ instruction offsets
_COMMENT = re.compile(r"/\*.*?\*/")  # encodings and other comments
_LABEL = re.compile(r"\.L_x_\d+")
_LABEL_DEF = re.compile(r"^(\.L_x_\d+):$")
_BRANCHES = ("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "BSSY", "BREAK", "SSY", "PBK", "PCNT", "CAL", "JCAL")
_OPCODE = re.compile(r"^(?:@!?U?P\w+\s+)?(\S+)")
_HEX = re.compile(r"(?<![\w\[])0x[0-9a-fA-F]+(?![\w\]])")


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


def normalise(lines: list[str], name: str = "") -> list[str]:
    """Machine code only: no offsets, encodings, directives or padding; labels renumbered L0, L1, ... by first use."""
    numbers: dict[str, str] = {}

    def label(match: re.Match) -> str:
        return numbers.setdefault(match.group(0), f"L{len(numbers)}")

    out: list[str] = []
    for raw in lines:
        text = _COMMENT.sub(" ", _OFFSET.sub(" ", raw)).strip()
        if not text or text.startswith(".") and not _LABEL_DEF.match(text) or text in (f"{name}:", f".text.{name}:"):
            continue
        if text.endswith(":") and not _LABEL_DEF.match(text):
            continue  # other symbol labels
        text = re.sub(r"\s*;\s*$", "", text)
        text = _LABEL.sub(label, re.sub(r"\s+", " ", text))
        opcode = _OPCODE.match(text).group(1)
        if opcode.split(".", 1)[0] in _BRANCHES:
            text = _HEX.sub("<addr>", text)
        out.append(text)
    while out and (out[-1] == "NOP" or out[-1].endswith(":")):
        out.pop()  # padding after the last instruction, and the end-of-function label
    return out
