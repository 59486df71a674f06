"""Find the CUDA toolchain this environment has: NVRTC and the CUDA headers it compiles against.

NVRTC is looked for, first found wins: $KCONTRACT_NVRTC (a libnvrtc.so path); NVIDIA's NVRTC wheels in this
Python environment (CUDA 13, then CUDA 12); a CUDA toolkit ($CUDA_HOME, $CUDA_PATH, the one holding the `nvcc`
on the PATH, /usr/local/cuda); $CONDA_PREFIX; the system's libraries (ldconfig). The headers (cuda_bf16.h and
friends) come from $KCONTRACT_CUDA_INCLUDE, else from the same places, of NVRTC's major version, the wheel or
toolkit that gave NVRTC first. What shapes a cubin is NVRTC and those headers: the toolchain's id names both.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kcontract.errors import EnvironmentProblem

NVRTC_ENV, INCLUDE_ENV = "KCONTRACT_NVRTC", "KCONTRACT_CUDA_INCLUDE"
WHEELS = (  # (NVRTC wheel, its library, the runtime wheel with the headers, the headers folder), newest first
    ("nvidia-cuda-nvrtc", "nvidia/cu13/lib/libnvrtc.so.13", "nvidia-cuda-runtime", "nvidia/cu13/include"),
    ("nvidia-cuda-nvrtc-cu12", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "nvidia-cuda-runtime-cu12",
     "nvidia/cuda_runtime/include"),
)
INSTALL_HINT = ("install a toolchain: pip install 'kcontract[cu13]' (or '[cu12]'), or set CUDA_HOME to a CUDA "
                "toolkit, or KCONTRACT_NVRTC to a libnvrtc.so")


@dataclass(frozen=True)
class Part:
    """One piece of the toolchain: where it is, its version and where it came from."""

    path: Path
    version: str  # "13.0.88"; "13.0" where only NVRTC's own major.minor is known
    origin: str  # "nvidia-cuda-nvrtc wheel", "CUDA toolkit /usr/local/cuda-12.8", "KCONTRACT_NVRTC", ...

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


@dataclass(frozen=True)
class Toolchain:
    """NVRTC and the headers it compiles against: together they decide every cubin's bytes."""

    nvrtc: Part  # the library file
    headers: Part  # the folder holding cuda_bf16.h
    sms: tuple[int, ...]  # the SM numbers this NVRTC builds for

    @property
    def id(self) -> str:
        """`cuda-13.5.37` when NVRTC and headers share a version, else `nvrtc-13.0.88+headers-13.0.96`."""
        if self.nvrtc.version == self.headers.version:
            return f"cuda-{self.nvrtc.version}"
        return f"nvrtc-{self.nvrtc.version}+headers-{self.headers.version}"

    def describe(self) -> str:
        """`nvrtc 13.0.88 (nvidia-cuda-nvrtc wheel), headers 13.0.96 (nvidia-cuda-runtime wheel)`."""
        return (f"nvrtc {self.nvrtc.version} ({self.nvrtc.origin}), headers {self.headers.version} "
                f"({self.headers.origin})")

    def builds(self, sm: str) -> bool:
        """Whether this NVRTC can build for a target such as `sm_90a` (the base SM decides)."""
        return int(sm[3:].rstrip("af")) in self.sms

    def as_dict(self) -> dict:
        """What a receipt or report records of the toolchain."""
        return {"id": self.id, "nvrtc": self.nvrtc.version, "nvrtc_from": self.nvrtc.origin,
                "nvrtc_path": str(self.nvrtc.path), "headers": self.headers.version,
                "headers_from": self.headers.origin, "headers_path": str(self.headers.path)}


def wheel_file(dist: str, suffix: str) -> Path | None:
    """The installed file of `dist` whose path ends with `suffix`, or None."""
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return None
    for entry in files:
        if str(entry).replace("\\", "/").endswith(suffix):
            path = Path(entry.locate()).resolve()
            return path if path.exists() else None
    return None


def _wheel_version(dist: str) -> str:
    return metadata.version(dist)


def toolkit_roots() -> list[tuple[Path, str]]:
    """CUDA toolkit folders to look in, with how each was found, in order."""
    found: list[tuple[Path, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            found.append((Path(os.environ[var]), f"${var}"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        found.append((Path(nvcc).resolve().parent.parent, "the nvcc on the PATH"))
    found.append((Path("/usr/local/cuda"), "/usr/local/cuda"))
    if os.environ.get("CONDA_PREFIX"):
        found.append((Path(os.environ["CONDA_PREFIX"]), "$CONDA_PREFIX"))
    unique: dict[Path, tuple[Path, str]] = {}
    for root, how in found:
        unique.setdefault(root.resolve(), (root.resolve(), how))
    return [item for item in unique.values() if item[0].is_dir()]


def _toolkit_library(root: Path) -> Path | None:
    """The libnvrtc.so of a toolkit or prefix (lib64, lib, targets/*/lib), or None."""
    for folder in (root / "lib64", root / "lib", *sorted(root.glob("targets/*/lib"))):
        names = [folder / "libnvrtc.so", *sorted(folder.glob("libnvrtc.so.[0-9]*"))]
        for path in names:
            if path.exists():
                return path
    return None


def toolkit_version(root: Path, component: str) -> str | None:
    """A toolkit component's version ("13.0.88") from version.json or its dist-info folders, or None."""
    try:
        facts = json.loads((root / "version.json").read_text())
        return str(facts[component]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    wheel = {"cuda_nvrtc": "nvidia_cuda_nvrtc", "cuda_cudart": "nvidia_cuda_runtime"}.get(component)
    for info in sorted(root.glob(f"dist-info/{wheel}-*.dist-info")) if wheel else []:
        return info.name[len(wheel) + 1:-len(".dist-info")]
    return None


def _library_version(path: Path) -> str | None:
    """`13.0.88` from a resolved file name such as libnvrtc.so.13.0.88."""
    m = re.search(r"\.so\.(\d+\.\d+\.\d+)$", path.resolve().name)
    return m.group(1) if m else None


def _ldconfig_nvrtc() -> Path | None:
    """The libnvrtc.so the system's dynamic loader knows of, or None."""
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in listing.splitlines():
        m = re.match(r"\s*libnvrtc\.so(?:\.\d+)*\s.*=>\s*(\S+)$", line)
        if m and Path(m.group(1)).exists():
            return Path(m.group(1))
    return None


def nvrtc_candidates() -> list[tuple[Path, str | None, str, str | None]]:
    """(library, version if known, origin, the headers' origin it goes with) for every NVRTC here, in order."""
    found: list[tuple[Path, str | None, str, str | None]] = []
    if os.environ.get(NVRTC_ENV):
        path = Path(os.environ[NVRTC_ENV])
        if not path.is_file():
            raise EnvironmentProblem(f"{NVRTC_ENV}={path}: no such file; point it at a libnvrtc.so, or unset it")
        found.append((path, _library_version(path), NVRTC_ENV, None))
    for dist, library, runtime, _ in WHEELS:
        path = wheel_file(dist, library)
        if path is not None:
            found.append((path, _wheel_version(dist), f"{dist} wheel", f"{runtime} wheel"))
    for root, how in toolkit_roots():
        path = _toolkit_library(root)
        if path is not None:
            origin = f"CUDA toolkit {root} ({how})"
            found.append((path, toolkit_version(root, "cuda_nvrtc") or _library_version(path), origin, origin))
    system = _ldconfig_nvrtc()
    if system is not None:
        found.append((system, _library_version(system), "the system's libraries (ldconfig)", None))
    return found


def header_candidates() -> list[Part]:
    """Folders holding cuda_bf16.h: the override, NVIDIA's runtime wheels, then toolkits, with versions."""
    found: list[Part] = []
    if os.environ.get(INCLUDE_ENV):
        folder = Path(os.environ[INCLUDE_ENV])
        if not (folder / "cuda_bf16.h").is_file():
            raise EnvironmentProblem(f"{INCLUDE_ENV}={folder}: no cuda_bf16.h there; point it at a CUDA include "
                                     f"folder, or unset it")
        version = toolkit_version(folder.resolve().parent, "cuda_cudart") or _header_version(folder)
        found.append(Part(folder.resolve(), version, INCLUDE_ENV))
    for _, _, dist, folder in WHEELS:
        header = wheel_file(dist, f"{folder}/cuda_bf16.h")
        if header is not None:
            found.append(Part(header.parent, _wheel_version(dist), f"{dist} wheel"))
    for root, how in toolkit_roots():
        for include in (root / "include", *sorted(root.glob("targets/*/include"))):
            if (include / "cuda_bf16.h").is_file():
                version = toolkit_version(root, "cuda_cudart") or _header_version(include)
                found.append(Part(include.resolve(), version, f"CUDA toolkit {root} ({how})"))
                break
    return found


def _header_version(folder: Path) -> str:
    """`13.0` from CUDART_VERSION in cuda_runtime_api.h, where nothing better says."""
    try:
        m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", (folder / "cuda_runtime_api.h").read_text())
    except OSError:
        m = None
    if not m:
        return "unknown"
    value = int(m.group(1))
    return f"{value // 1000}.{value % 1000 // 10}"


@functools.cache
def find_toolchain() -> Toolchain:
    """The first NVRTC that loads, with headers of its major version; EnvironmentProblem with the fix if none."""
    from kcontract.toolchain.nvrtc import load

    tried: list[str] = []
    for path, version, origin, home in nvrtc_candidates():
        try:
            nvrtc = load(str(path))
            major, minor = nvrtc.version()
            sms = tuple(nvrtc.supported_sms())
        except EnvironmentProblem as problem:
            tried.append(f"{path} ({origin}): {problem.message}")
            continue
        if version is None or not version.startswith(f"{major}.{minor}"):
            version = f"{major}.{minor}"
        headers = [h for h in header_candidates() if h.version.split(".")[0] == str(major)]
        if not headers:
            raise EnvironmentProblem(f"NVRTC {version} ({origin}) found, but no CUDA {major} headers (cuda_bf16.h): "
                                     f"pip install 'nvidia-cuda-runtime{'' if major >= 13 else '-cu12'}=={version}'"
                                     f", or set {INCLUDE_ENV}")
        chosen = next((h for h in headers if h.origin == INCLUDE_ENV), None) or \
            next((h for h in headers if h.origin == home), headers[0])
        return Toolchain(Part(path, version, origin), chosen, sms)
    detail = f" (tried: {'; '.join(tried)})" if tried else ""
    raise EnvironmentProblem(f"no NVRTC found{detail}: {INSTALL_HINT}")
