"""A kernel's build as a job carries it to a worker: plain data, pickled, that imports nothing from the toolchain,
so the worker loads machine code and reads launch facts without compiling, hashing sources or reading ELF."""

from __future__ import annotations

from dataclasses import dataclass, field

TRITON_SCRATCH = 2  # a Triton kernel's parameters after its own: the global and the profile scratch pointers


@dataclass(frozen=True)
class ModuleBuild:
    """One kernel's module on one SM: where its machine code lies and what was read from it."""

    sm: str
    path: str  # the cubin in the compile cache
    lowered: dict[str, str]  # name expression -> the symbol it became
    resources: dict[str, dict[str, int]]  # symbol -> registers, static_smem, stack, spills, barriers
    cached: bool  # found in the compile cache rather than compiled for this run
    divisors: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)  # symbol -> argument position ->
    # (parameter, the power of two its symbol declares divides it in every launch)


@dataclass(frozen=True)
class KernelBuild:
    """A kernel (an entry's, or a control's standing in for it) built for the SMs a task needs, the toolchain that
    built it, and what kept it from building where something did."""

    kind: str  # the builder's kind ("cuda")
    source: str  # as the contract writes it
    shown: str  # the source with its patch, for messages
    toolchain: str  # the id of the toolchain that built it
    compiler: str  # its compiler and version (`nvrtc 13.0.88`), for messages
    inputs_sha256: str | None  # source, local headers and options: what a launch record depends on
    modules: dict[str, ModuleBuild] = field(default_factory=dict)  # by SM
    failures: dict[str, str] = field(default_factory=dict)  # SM -> the compiler's log
    skipped: tuple[str, ...] = ()  # target SMs the toolchain cannot build for
    exports: dict[str, dict[str, int]] = field(default_factory=dict)  # SM -> the exports its launch reads
    export_errors: dict[str, str] = field(default_factory=dict)  # SM -> why its exports cannot be read
    inputs_error: str = ""  # why the inputs could not be read (a missing file, a patch that does not apply)

    def on(self, sm: str) -> ModuleBuild | None:
        """The module for `sm`, or None where it was not built."""
        return self.modules.get(sm)

    def only(self, sm: str) -> tuple[dict[str, dict[str, int]], list[str]]:
        """The launch exports (`{sm: values}`, empty where none were read) and their errors on one SM."""
        return ({sm: self.exports[sm]} if sm in self.exports else {}), \
            ([self.export_errors[sm]] if sm in self.export_errors else [])
