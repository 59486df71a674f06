"""Find nvdisasm, cuobjdump and the CUDA headers inside the pinned wheels, and run the tools."""

from __future__ import annotations

import functools
import os
import subprocess
from importlib import metadata
from pathlib import Path

from kcontract.errors import EnvironmentProblem
from kcontract.toolchain.pins import PINS, pip_command

_TOOLS = {"nvdisasm": "nvidia-cuda-nvdisasm", "cuobjdump": "nvidia-cuda-cuobjdump"}


def _wheel_file(dist: str, suffix: str) -> Path | None:
    """The installed file of `dist` whose path ends with `suffix`."""
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return None
    for entry in files:
        if str(entry).replace("\\", "/").endswith(suffix):
            path = Path(entry.locate()).resolve()
            return path if path.exists() else None
    return None


@functools.cache
def tool_path(name: str) -> Path:
    """The path of nvdisasm or cuobjdump from its pinned wheel."""
    dist = _TOOLS[name]
    path = _wheel_file(dist, f"bin/{name}")
    if path is None:
        raise EnvironmentProblem(f"{name} not found: the wheel {dist}=={PINS[dist]} is not installed; "
                                 f"run `{pip_command()}`")
    if not os.access(path, os.X_OK):
        raise EnvironmentProblem(f"{path} is not executable: run `chmod +x {path}` or reinstall {dist}=={PINS[dist]}")
    return path


@functools.cache
def cuda_include_dir() -> Path:
    """The CUDA headers (cuda_bf16.h and friends): the runtime wheel's, else $CUDA_HOME's (a GPU machine's own)."""
    dist = "nvidia-cuda-runtime"
    header = _wheel_file(dist, "include/cuda_bf16.h")
    if header is None:
        local = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / "cuda_bf16.h"
        header = local if local.is_file() else None
    if header is None:
        raise EnvironmentProblem(f"CUDA headers not found: the wheel {dist}=={PINS[dist]} is not installed; "
                                 f"run `{pip_command()}`")
    return header.parent


def run_tool(name: str, args: list[str]) -> str:
    """Run a toolchain binary and return its stdout; a failure is an EnvironmentProblem with its stderr."""
    path = tool_path(name)
    try:
        done = subprocess.run([str(path), *args], capture_output=True, text=True, check=False)
    except OSError as error:
        raise EnvironmentProblem(f"{path} could not run ({error.strerror}): reinstall it with `{pip_command()}`")
    if done.returncode != 0:
        raise EnvironmentProblem(f"{name} {' '.join(args)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout
