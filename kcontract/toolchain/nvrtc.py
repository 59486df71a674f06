"""Compile one CUDA source for one SM to a cubin through NVRTC (cuda.bindings), with name expressions."""

from __future__ import annotations

from dataclasses import dataclass

from kcontract.errors import EnvironmentProblem, KContractError
from kcontract.exitcodes import ExitCode
from kcontract.toolchain.pins import pip_command

FORCED_OPTIONS = ("--ptxas-options=-v",)  # the ptxas report gives registers, stack and spills per function


@dataclass(frozen=True)
class Compiled:
    """A cubin, the mangled name of each name expression, and NVRTC's log (with the ptxas report)."""

    cubin: bytes
    lowered: dict[str, str]
    log: str


@dataclass(frozen=True)
class Failed:
    """A compile that NVRTC refused, with its log."""

    log: str


class CompileError(KContractError):
    """A kernel source that does not compile for an SM; carries the NVRTC log."""

    exit_code = ExitCode.FAILED

    def __init__(self, source: str, sm: str, log: str, users: tuple[str, ...] = ()):
        who = f" (used by {', '.join(users)})" if users else ""
        super().__init__(f"{source} does not compile for {sm}{who}; NVRTC says:\n{log.strip()}")
        self.source, self.sm, self.log, self.users = source, sm, log, users


def _nvrtc():
    """The cuda.bindings NVRTC module, or an EnvironmentProblem naming the pip command."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise EnvironmentProblem(f"NVRTC is not installed (cuda.bindings missing): run `{pip_command()}`") from None
    return nvrtc


def _check(result, what: str):
    """Unpack a cuda.bindings (status, *values) tuple; a bad status raises."""
    status, *values = result
    if int(status) != 0:
        raise _NvrtcStatus(what, status)
    return values[0] if len(values) == 1 else values


class _NvrtcStatus(Exception):
    """A non-success NVRTC status from one call."""

    def __init__(self, what: str, status):
        super().__init__(f"{what}: {getattr(status, 'name', status)}")
        self.status = status


def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor) as loaded."""
    try:
        return tuple(_check(_nvrtc().nvrtcVersion(), "nvrtcVersion"))
    except RuntimeError as error:
        raise EnvironmentProblem(f"NVRTC could not load ({error}): run `{pip_command()}`") from None


def local_toolchain_id() -> str:
    """`local-nvrtc-13.0`: the NVRTC this machine has, when it is not the pinned one."""
    major, minor = nvrtc_version()
    return f"local-nvrtc-{major}.{minor}"


def _log(nvrtc, prog) -> str:
    """The program's compile log as text."""
    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    buf = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.rstrip(b"\0").decode("utf-8", "replace").strip()


def compile_cubin(source: bytes, label: str, expressions: tuple[str, ...], sm: str,
                  options: tuple[str, ...], include_dirs: tuple[str, ...]) -> Compiled | Failed:
    """Compile `source` (named `label`) for `sm` with every name expression; a Failed carries NVRTC's log."""
    nvrtc = _nvrtc()
    try:
        prog = _check(nvrtc.nvrtcCreateProgram(source, label.encode(), 0, [], []), "nvrtcCreateProgram")
    except RuntimeError as error:
        raise EnvironmentProblem(f"NVRTC could not load ({error}): run `{pip_command()}`") from None
    try:
        for expression in expressions:
            _check(nvrtc.nvrtcAddNameExpression(prog, expression.encode()), f"name expression {expression!r}")
        args = [f"-arch={sm}", *FORCED_OPTIONS, *(f"-I{d}" for d in include_dirs), *options]
        status, = nvrtc.nvrtcCompileProgram(prog, len(args), [a.encode() for a in args])
        log = _log(nvrtc, prog)
        if int(status) != 0:
            return Failed(log or getattr(status, "name", str(status)))
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        lowered = {}
        for expression in expressions:
            name = _check(nvrtc.nvrtcGetLoweredName(prog, expression.encode()), f"lowered name of {expression!r}")
            lowered[expression] = name.decode() if isinstance(name, bytes) else str(name)
        return Compiled(cubin, lowered, log)
    except _NvrtcStatus as error:
        return Failed(f"{error} (check the name expression against the kernel's template parameters)")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_job(job: tuple) -> tuple[str, Compiled | Failed]:
    """Worker entry point: (key, compile_cubin args...) -> (key, result)."""
    key, *args = job
    return key, compile_cubin(*args)
