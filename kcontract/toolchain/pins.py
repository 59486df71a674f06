"""Exact versions of the CUDA toolchain wheels; the toolchain id is part of every record and cache key."""

from __future__ import annotations

from importlib import metadata

from kcontract.errors import EnvironmentProblem

PINS = {
    "cuda-bindings": "13.5.0",  # NVRTC through Python; name expressions give mangled template names
    "nvidia-cuda-nvrtc": "13.5.37",  # the compiler (and its ptxas)
    "nvidia-cuda-runtime": "13.5.37",  # headers: cuda_bf16.h, cuda_fp16.h, cuda_occupancy.h
    "nvidia-cuda-nvdisasm": "13.5.37",  # SASS text for sass-diff
    "nvidia-cuda-cuobjdump": "13.5.37",  # -res-usage, which the tests hold the ptxas report against
}
_OUTPUT_WHEELS = ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-nvdisasm")  # what shapes cubins and SASS


def toolchain_id() -> str:
    """A short name for the pinned toolchain, e.g. `cuda-13.5.37`."""
    versions = {PINS[name] for name in _OUTPUT_WHEELS}
    if len(versions) == 1:
        return f"cuda-{versions.pop()}"
    return "+".join(f"{name.removeprefix('nvidia-cuda-')}-{PINS[name]}" for name in _OUTPUT_WHEELS)


def pip_command() -> str:
    """The command that installs the pinned toolchain."""
    return "pip install " + " ".join(f"'{name}=={version}'" for name, version in PINS.items())


def installed_versions() -> dict[str, str | None]:
    """Each pinned wheel's installed version, or None where it is missing."""
    found: dict[str, str | None] = {}
    for name in PINS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def require_pinned() -> None:
    """Raise EnvironmentProblem naming the pip command unless every pinned wheel is installed at its pin."""
    wrong = []
    for name, version in installed_versions().items():
        if version != PINS[name]:
            wrong.append(f"{name} {'missing' if version is None else version + ' installed'}, pinned {PINS[name]}")
    if wrong:
        raise EnvironmentProblem(f"the CUDA toolchain does not match its pins ({'; '.join(wrong)}): "
                                 f"run `{pip_command()}` (or `pip install -e .`)")
