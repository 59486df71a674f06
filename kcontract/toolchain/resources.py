"""Per-function resources from the ptxas report in NVRTC's log, or from `cuobjdump -res-usage`."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from kcontract.toolchain.tools import run_tool

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_RES_FUNC = re.compile(r"^\s*Function (\S+):\s*$")
_RES_PAIR = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


@dataclass(frozen=True)
class FunctionResources:
    """What ptxas allotted one kernel: registers, static shared memory, stack frame, spills, barriers."""

    registers: int
    static_smem: int
    stack: int
    spill_stores: int
    spill_loads: int
    barriers: int

    def as_dict(self) -> dict[str, int]:
        """Plain fields for records."""
        return asdict(self)


def parse_ptxas_log(log: str) -> dict[str, FunctionResources]:
    """Resources of every entry function in a `--ptxas-options=-v` report, by mangled name."""
    facts: dict[str, dict[str, int]] = {}
    entry = props = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
            facts.setdefault(entry, {})
        elif m := _PROPS.search(line):
            props = m.group(1)
        elif m := _FRAME.search(line):
            if props in facts or props == entry:
                facts.setdefault(props, {}).update(
                    stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif (m := _USED.search(line)) and entry is not None:
            found = facts.setdefault(entry, {})
            found["registers"] = int(m.group(1))
            found["barriers"] = int(b.group(1)) if (b := _BARRIERS.search(line)) else 0
            found["static_smem"] = int(s.group(1)) if (s := _SMEM.search(line)) else 0
    out = {}
    for name, found in facts.items():
        if "registers" in found:
            out[name] = FunctionResources(found["registers"], found.get("static_smem", 0), found.get("stack", 0),
                                          found.get("spill_stores", 0), found.get("spill_loads", 0),
                                          found.get("barriers", 0))
    return out


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump -res-usage` as {mangled: {"REG": .., "STACK": .., "SHARED": .., "LOCAL": ..}}."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        if m := _RES_FUNC.match(line):
            current = m.group(1)
        elif current is not None and "REG:" in line:
            out[current] = {key: int(value) for key, value in _RES_PAIR.findall(line)}
            current = None
    return out


def res_usage(cubin: Path) -> dict[str, dict[str, int]]:
    """Run `cuobjdump -res-usage` on a cubin (SHARED there includes the 1 KiB reserved on sm_90+)."""
    return parse_res_usage(run_tool("cuobjdump", ["-res-usage", str(cubin)]))
