"""Compile one CUDA source for one SM to a cubin with NVRTC, called through ctypes on the library that
`locate` found (CUDA 12 or 13, from a wheel, a toolkit or the system), with name expressions."""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

from kcontract.errors import EnvironmentProblem, KContractError
from kcontract.exitcodes import ExitCode

FORCED_OPTIONS = ("--ptxas-options=-v",)  # the ptxas report gives registers, stack and spills per function
_P = ctypes.c_void_p
_STRINGS = ctypes.POINTER(ctypes.c_char_p)


@dataclass(frozen=True)
class Compiled:
    """A cubin, the mangled name of each name expression, and NVRTC's log (with the ptxas report)."""

    cubin: bytes
    lowered: dict[str, str]
    log: str
    ptx: str = ""  # the PTX it came from, where asked for


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


class _Status(Exception):
    """A non-success NVRTC status from one call."""


_SIGNATURES = {  # name -> argument types; every function returns nvrtcResult (an int)
    "nvrtcVersion": (ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)),
    "nvrtcGetNumSupportedArchs": (ctypes.POINTER(ctypes.c_int),),
    "nvrtcGetSupportedArchs": (ctypes.POINTER(ctypes.c_int),),
    "nvrtcCreateProgram": (ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, _STRINGS, _STRINGS),
    "nvrtcDestroyProgram": (ctypes.POINTER(_P),),
    "nvrtcAddNameExpression": (_P, ctypes.c_char_p),
    "nvrtcCompileProgram": (_P, ctypes.c_int, _STRINGS),
    "nvrtcGetProgramLogSize": (_P, ctypes.POINTER(ctypes.c_size_t)),
    "nvrtcGetProgramLog": (_P, ctypes.c_char_p),
    "nvrtcGetCUBINSize": (_P, ctypes.POINTER(ctypes.c_size_t)),
    "nvrtcGetCUBIN": (_P, ctypes.c_char_p),
    "nvrtcGetPTXSize": (_P, ctypes.POINTER(ctypes.c_size_t)),
    "nvrtcGetPTX": (_P, ctypes.c_char_p),
    "nvrtcGetLoweredName": (_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)),
}


class Nvrtc:
    """The NVRTC C API of one shared library, every call checked."""

    def __init__(self, path: str):
        try:
            for builtins in sorted(Path(path).parent.glob("libnvrtc-builtins.so.*")):  # some NVRTCs find it by
                ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)  # soname only: load it from beside them first
                break
            self.lib = ctypes.CDLL(path)
        except OSError as error:
            raise EnvironmentProblem(f"NVRTC at {path} does not load ({error}): reinstall it, or set "
                                     f"KCONTRACT_NVRTC to a working libnvrtc.so") from None
        for name, argtypes in _SIGNATURES.items():
            function = getattr(self.lib, name, None)
            if function is None:
                raise EnvironmentProblem(f"{path} has no {name}: it is not NVRTC 11.2 or newer; install NVRTC 12 "
                                         f"or 13 (pip install 'kcontract[cu13]')")
            function.argtypes, function.restype = argtypes, ctypes.c_int
        self.lib.nvrtcGetErrorString.argtypes, self.lib.nvrtcGetErrorString.restype = (ctypes.c_int,), ctypes.c_char_p
        self.path = path

    def call(self, name: str, *args) -> None:
        """Call an NVRTC function; a non-success status raises _Status with NVRTC's words."""
        status = getattr(self.lib, name)(*args)
        if status != 0:
            text = self.lib.nvrtcGetErrorString(status) or b"unknown status"
            raise _Status(f"{name}: {text.decode(errors='replace')}")

    def version(self) -> tuple[int, int]:
        """(major, minor) of this NVRTC."""
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.call("nvrtcVersion", ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def supported_sms(self) -> list[int]:
        """The SM numbers this NVRTC builds for (80, 86, ..., 121)."""
        count = ctypes.c_int()
        self.call("nvrtcGetNumSupportedArchs", ctypes.byref(count))
        archs = (ctypes.c_int * count.value)()
        self.call("nvrtcGetSupportedArchs", archs)
        return list(archs)

    def _text(self, prog, size_fn: str, get_fn: str) -> bytes:
        size = ctypes.c_size_t()
        self.call(size_fn, prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        self.call(get_fn, prog, buf)
        return buf.raw[:size.value]

    def compile(self, source: bytes, label: str, expressions: tuple[str, ...], args: list[str], ptx: bool = False
                ) -> Compiled | Failed:
        """Compile with every name expression (`ptx`: keep the PTX too); a refused compile is a Failed with NVRTC's
        log."""
        prog = _P()
        self.call("nvrtcCreateProgram", ctypes.byref(prog), source, label.encode(), 0, None, None)
        try:
            for expression in expressions:
                self.call("nvrtcAddNameExpression", prog, expression.encode())
            options = (ctypes.c_char_p * len(args))(*(a.encode() for a in args))
            status = self.lib.nvrtcCompileProgram(prog, len(args), options)
            log = self._text(prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog")
            log = log.rstrip(b"\0").decode("utf-8", "replace").strip()
            if status != 0:
                return Failed(log or self.lib.nvrtcGetErrorString(status).decode(errors="replace"))
            cubin = self._text(prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
            lowered = {}
            for expression in expressions:
                name = ctypes.c_char_p()
                self.call("nvrtcGetLoweredName", prog, expression.encode(), ctypes.byref(name))
                lowered[expression] = name.value.decode()
            text = self._text(prog, "nvrtcGetPTXSize", "nvrtcGetPTX").rstrip(b"\0").decode() if ptx else ""
            return Compiled(cubin, lowered, log, text)
        except _Status as error:
            return Failed(f"{error} (check the name expression against the kernel's template parameters)")
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


@functools.cache
def load(path: str) -> Nvrtc:
    """The NVRTC library at `path`, loaded once per process."""
    return Nvrtc(path)


def compile_cubin(nvrtc_path: str, source: bytes, label: str, expressions: tuple[str, ...], sm: str,
                  options: tuple[str, ...], include_dirs: tuple[str, ...], ptx: bool = False) -> Compiled | Failed:
    """Compile `source` (named `label`) for `sm` with the NVRTC at `nvrtc_path` (`ptx`: keep its PTX); a Failed
    carries NVRTC's log."""
    args = [f"-arch={sm}", *FORCED_OPTIONS, *(f"-I{d}" for d in include_dirs), *options]
    return load(nvrtc_path).compile(source, label, expressions, args, ptx)


def compile_job(job: tuple) -> tuple[str, Compiled | Failed]:
    """Worker entry point: (key, compile_cubin args...) -> (key, result)."""
    key, *args = job
    return key, compile_cubin(*args)
