"""The global loads of the repository's Triton RMSNorm compiled as a symbol says, read from its SASS."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from tests.helpers.triton_project import ROOT, SOURCE


def global_loads(expression: str, sm: str) -> list[str]:
    """Every global load instruction (LDG, LDGSTS) of the kernel compiled for `sm`, such as `LDG.E.128`."""
    from kcontract.builds.triton_compile import _compile
    from kcontract.toolchain.tools import run_tool

    compiled = _compile((ROOT / SOURCE).read_bytes(), ROOT / SOURCE, expression, int(re.sub(r"\D", "", sm)))
    with tempfile.TemporaryDirectory() as scratch:
        cubin = Path(scratch) / "kernel.cubin"
        cubin.write_bytes(compiled.cubin)
        sass = run_tool("cuobjdump", ["-sass", str(cubin)])
    return re.findall(r"\b(LDGSTS\S*|LDG\S*)", sass)
