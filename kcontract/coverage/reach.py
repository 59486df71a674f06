"""Which probes an entry's instantiations can reach: the instrumented source compiled with the entry's symbols
alone for one SM, and the counters its PTX names in those functions (and in the device functions left
uninlined). A probe in a template branch or a function this entry never instantiates is not there, so its lines
count apart from the entry's gaps."""

from __future__ import annotations

import re

FUNCTION = re.compile(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", re.M)
COUNTER = re.compile(r"\bkcontract_cov_(\d+)\b")


def ptx_functions(ptx: str) -> dict[str, tuple[str, str]]:
    """PTX split into its functions: mangled name -> (".entry" or ".func", text up to the next function)."""
    found = list(FUNCTION.finditer(ptx))
    return {m.group(2): (m.group(1), ptx[m.start():(found[i + 1].start() if i + 1 < len(found) else len(ptx))])
            for i, m in enumerate(found)}


def reachable(builds, kernel, expressions: list[str], sm: str) -> set[int]:
    """The probes named in the PTX of `expressions` of an instrumented kernel (and of uninlined device functions)
    for `sm`, compiled by `builds` (kcontract.builds.builds.Builds) through its cache."""
    ptx, lowered = builds.ptx(kernel, tuple(expressions), sm)
    wanted = {lowered[e] for e in expressions}
    text = "".join(body for name, (kind, body) in ptx_functions(ptx).items() if name in wanted or kind == "func")
    return {int(n) for n in COUNTER.findall(text)}
