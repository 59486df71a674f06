"""A project whose user code ends the process or raises an interrupt: at import, in a call, in a drift factory."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.cli import ROOT

ESCAPES = {"exit": "sys.exit(0)", "interrupt": "raise KeyboardInterrupt", "generator": "raise GeneratorExit"}

CONTRACT = """version: 1
seed: 7
entries:
  - name: norm
    family: rmsnorm
    kernel: {python: "kern:rmsnorm"}
    cases:
      - {name: h64, hidden: 64, rows: 2}
"""


def kernel_project(folder: Path, at: str, escape: str) -> Path:
    """A contract of one RMSNorm whose module raises `escape` (an ESCAPES key) `at` import or call."""
    body = ESCAPES[escape]
    text = ("import sys\n" + (body + "\n" if at == "import" else "") +
            "def rmsnorm(x, w, out, *, hidden, eps):\n" + (f"    {body}\n" if at == "call" else "    pass\n"))
    (folder / "kern.py").write_text(text)
    (folder / "contract.yaml").write_text(CONTRACT)
    return folder / "contract.yaml"


def drift_target(folder: Path, at: str) -> str:
    """A drift TARGET whose module exits at import, or whose factory exits when called."""
    (folder / "exiting_model.py").write_text("import sys\n" + ("sys.exit(0)\n" if at == "import" else "") +
                                             "def small(**options):\n    sys.exit(0)\n")
    return "exiting_model:small"


FIRST_CALL_OUT_OF_MEMORY = '''import sys
from pathlib import Path

sys.path.insert(0, {root!r})
from tests.doubles.rmsnorm import rmsnorm as numpy_rmsnorm


class OutOfMemoryError(MemoryError):
    """As CuPy's pool raises it."""


def rmsnorm(x, w, out, *, hidden, eps):
    try:  # the first call of any worker creates the marker; two at once cannot both create it
        Path(__file__).with_name("ran_once").open("x").close()
    except FileExistsError:
        numpy_rmsnorm(x, w, out, hidden=hidden, eps=eps)
        return
    raise OutOfMemoryError("Out of memory allocating 1,073,741,824 bytes (allocated so far: 0 bytes).")
'''


def out_of_memory_project(folder: Path) -> Path:
    """A contract of two entries whose kernel (the numpy RMSNorm) runs out of device memory on its first call in
    the project, and computes on every later one."""
    (folder / "kern.py").write_text(FIRST_CALL_OUT_OF_MEMORY.format(root=str(ROOT)))
    entry = CONTRACT[CONTRACT.index("  - name: norm"):]
    (folder / "contract.yaml").write_text(CONTRACT + entry.replace("name: norm", "name: norm2"))
    return folder / "contract.yaml"
