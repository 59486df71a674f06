"""Find nvdisasm and cuobjdump (NVIDIA's wheels, a CUDA toolkit, then the PATH) and run them.

They only read cubins, so any version that knows the target SMs will do; only the commands that need one
(sass-diff, mutate's equivalence test) say so when it is missing.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kcontract.errors import EnvironmentProblem
from kcontract.toolchain.locate import wheel_file, toolkit_roots

_WHEELS = {"nvdisasm": "nvidia-cuda-nvdisasm", "cuobjdump": "nvidia-cuda-cuobjdump"}
_HINT = "pip install 'kcontract[tools]' (NVIDIA's nvdisasm and cuobjdump wheels), or put a CUDA toolkit's bin/ on the PATH"


@dataclass(frozen=True)
class Tool:
    """A disassembler binary, its version and where it came from."""

    name: str
    path: Path
    version: str
    origin: str


def _version(path: Path) -> str:
    """`13.0.85` from `TOOL --version`, or `unknown`."""
    try:
        text = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.search(r"V(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else "unknown"


def tool_candidates(name: str) -> list[tuple[Path, str]]:
    """(binary, origin) for every `name` this machine offers, in the documented order."""
    found: list[tuple[Path, str]] = []
    wheel = wheel_file(_WHEELS[name], f"bin/{name}")
    if wheel is not None:
        found.append((wheel, f"{_WHEELS[name]} wheel"))
    for root, how in toolkit_roots():
        if (root / "bin" / name).is_file():
            found.append(((root / "bin" / name).resolve(), f"CUDA toolkit {root} ({how})"))
    on_path = shutil.which(name)
    if on_path:
        found.append((Path(on_path).resolve(), "the PATH"))
    return found


@functools.cache
def find_tool(name: str) -> Tool:
    """The first runnable nvdisasm or cuobjdump; EnvironmentProblem naming the fix when there is none."""
    for path, origin in tool_candidates(name):
        if os.access(path, os.X_OK):
            return Tool(name, path, _version(path), origin)
    raise EnvironmentProblem(f"{name} not found (this command disassembles cubins): {_HINT}")


def tool_path(name: str) -> Path:
    """The path of nvdisasm or cuobjdump."""
    return find_tool(name).path


def run_tool(name: str, args: list[str]) -> str:
    """Run a disassembler and return its stdout; a failure is an EnvironmentProblem with its stderr."""
    path = tool_path(name)
    try:
        done = subprocess.run([str(path), *args], capture_output=True, text=True, check=False)
    except OSError as error:
        raise EnvironmentProblem(f"{path} could not run ({error.strerror}): {_HINT}") from None
    if done.returncode != 0:
        raise EnvironmentProblem(f"{name} {' '.join(args)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout
