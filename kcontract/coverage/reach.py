"""Which probes an entry's instantiations can reach: the instrumented source compiled with the entry's symbols
alone for one SM, and the counters its PTX names in those functions (and in the device functions left
uninlined). A probe in a template branch or a function this entry never instantiates is not there, so its lines
count apart from the entry's gaps."""

from __future__ import annotations

import re
from pathlib import Path

from kcontract.errors import KContractError
from kcontract.toolchain.build import nvrtc_options, read_inputs
from kcontract.toolchain.locate import find_toolchain
from kcontract.toolchain.nvrtc import Failed, compile_cubin
from kcontract.toolchain.units import Unit

FUNCTION = re.compile(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", re.M)
COUNTER = re.compile(r"\bkcontract_cov_(\d+)\b")


def ptx_functions(ptx: str) -> dict[str, tuple[str, str]]:
    """PTX split into its functions: mangled name -> (".entry" or ".func", text up to the next function)."""
    found = list(FUNCTION.finditer(ptx))
    return {m.group(2): (m.group(1), ptx[m.start():(found[i + 1].start() if i + 1 < len(found) else len(ptx))])
            for i, m in enumerate(found)}


def reachable(unit: Unit, expressions: list[str], sm: str, base: Path) -> set[int]:
    """The probes named in the PTX of `expressions` (and of uninlined device functions) for `sm`."""
    tool = find_toolchain()
    source, _, include = read_inputs(unit.source, unit.options, base, unit.patch)
    done = compile_cubin(str(tool.nvrtc.path), source, str(unit.source.resolve()), tuple(expressions), sm,
                         nvrtc_options(unit.options, base), (*include, str(tool.headers.path)), ptx=True)
    if isinstance(done, Failed):
        raise KContractError(f"{unit.shown} does not compile for {sm} with its probes: {done.log.strip()[:1500]}")
    wanted = {done.lowered[e] for e in expressions}
    text = "".join(body for name, (kind, body) in ptx_functions(done.ptx).items() if name in wanted or kind == "func")
    return {int(n) for n in COUNTER.findall(text)}
