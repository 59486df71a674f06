"""The contract file's generic schema; each family validates its own fields (Family.Spec)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from kcontract.gatetable import NUMBERS

DEFAULT_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_121")
GateNumber = Literal[NUMBERS]  # the gate numbers of kcontract.gatetable
PYTHON_TARGET = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


class Strict(BaseModel):
    """Base: unknown fields are errors, values keep their YAML types."""

    model_config = ConfigDict(extra="forbid", strict=True)


class LaunchDecl(Strict):
    """How one symbol is launched, as the contract declares it: threads per block and dynamic shared memory in bytes.

    Either may be an integer expression of the family's template arguments and of the kernel's `exports`
    ("{smem_bytes}", read back from each SM's cubin, or "17408 + 160 * {dim}");
    dynamic_smem may also name {smem_optin}, each target SM's opt-in bytes per block, or give {sm: bytes} for every
    target (loaded, either is {sm: bytes} where the targets differ).
    """

    threads: int | str = 256
    dynamic_smem: int | str | dict[str, int] = 0


class CompiledKernel(Strict):
    """A kernel compiled to a cubin per target SM: its source, its symbols, exports, patch, launches and instances.

    Symbols may name the family's template arguments as {placeholders} ("reduce<{dim}, {block}>");
    `instances` lists the argument values the source supports, so other shapes are refused at load time.
    """

    source: str
    symbols: dict[str, str]  # ABI role (e.g. partials, merge) -> name expression
    # what the kernel tells the checker: a name -> a value its compiled module holds (a CUDA `__constant__ const int`
    # variable, a Triton kernel's constexpr or shared bytes), read back per SM: launch sizes, a declared order's counts
    exports: dict[Annotated[str, Field(pattern=r"^[A-Za-z_]\w*$")], str] = {}
    patch: str | None = None  # a unified diff applied to `source` before it compiles (controls, mutants)
    options: list[str] = []
    launch: dict[str, LaunchDecl] = {}  # per role, overriding the family's default launch shape
    instances: list[dict[str, list[int | str]]] = []  # allowed template-argument and case-trait values


class CudaKernel(CompiledKernel):
    """A CUDA C++ kernel that NVRTC compiles: a symbol is a name expression (`rms_norm<256>`)."""

    kind: ClassVar[str] = "cuda"


class TritonKernel(CompiledKernel):
    """A `@triton.jit` kernel compiled ahead of time: a symbol is a call of the jit function with its constexprs
    and launch options (`rms_norm_rows(BLOCK=1024, num_warps=4, num_stages=1)`); its parameters carry their
    Triton types as annotations (`x: "*bf16"`)."""

    kind: ClassVar[str] = "triton"


class KernelRef(Strict):
    """Which kernel runs: exactly one of `python`, `cuda` or `triton`."""

    python: str | None = Field(default=None, pattern=PYTHON_TARGET)
    device: bool = False  # a Python kernel that takes CuPy device arrays instead of numpy ones
    cuda: CudaKernel | None = None
    triton: TritonKernel | None = None

    def launcher(self) -> str:
        """The launcher kind this reference needs."""
        if self.python is not None:
            return "device" if self.device else "python"
        return "triton" if self.triton is not None else "cuda"

    @property
    def compiled(self) -> CompiledKernel | None:
        """The CUDA or Triton kernel, compiled per target SM; None for a Python kernel."""
        return self.cuda if self.cuda is not None else self.triton

    @property
    def compiled_field(self) -> str:
        """`cuda` or `triton`: the field that holds the compiled kernel (`cuda` where there is none)."""
        return "triton" if self.triton is not None else "cuda"

    @property
    def label(self) -> str:
        """`module:function` or the kernel's source, for tables and messages."""
        return self.python if self.python is not None else self.compiled.source


KernelField = Annotated[Union[Annotated[KernelRef, Tag("kernel-ref")], Annotated[str, Tag("kernel-name")]],
                        Discriminator(lambda v: "kernel-name" if isinstance(v, str) else "kernel-ref")]
# a reference, or the name of one under the contract's `kernels` (tags with '-' never show in field paths)


class ArguedLine(Strict):
    """A kernel line, or one outcome of its `if`, that no case can execute, and why (as an equivalent mutant is
    argued)."""

    line: int = Field(ge=1)
    branch: Literal["then", "else"] | None = None  # one outcome of the line's `if`, not the whole line
    reason: str = Field(min_length=1)

    @property
    def outcome(self) -> str:
        """`line 159: then`, as coverage names an outcome."""
        return f"line {self.line}: {self.branch}"


class CoverageFloor(Strict):
    """The least share of its reachable kernel lines, and of their `if` outcomes, an entry's cases must execute,
    and the lines and outcomes argued out."""

    lines: float = Field(default=100.0, ge=0, le=100)
    branches: float | None = Field(default=None, ge=0, le=100)  # None: outcomes are reported, not floored
    argued: list[ArguedLine] = []

    @property
    def argued_lines(self) -> dict[int, str]:
        """Whole lines argued, with their reasons."""
        return {a.line: a.reason for a in self.argued if a.branch is None}

    @property
    def argued_outcomes(self) -> dict[str, str]:
        """`if` outcomes argued (`line 159: then`), with their reasons."""
        return {a.outcome: a.reason for a in self.argued if a.branch is not None}


class ArguedMutant(Strict):
    """A surviving mutant the gates cannot tell from the kernel, and why: its line and change as `kcontract mutate`
    prints them."""

    line: int = Field(ge=1)
    change: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class MutationArguments(Strict):
    """Survivors of `kcontract mutate` argued equivalent: counted apart, never in the score."""

    equivalent: list[ArguedMutant] = []


class Entry(BaseModel):
    """One kernel configuration under test; family-specific fields are validated by the family."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    family: str
    kernel: KernelField
    gates: list[GateNumber] | None = None  # default: every gate the family and kernel feed
    timeout: float = Field(default=300.0, gt=0, le=86400)  # seconds each gate of the entry may take in its worker
    description: str = ""
    coverage: CoverageFloor | None = None  # `kcontract coverage` fails below it (CUDA kernels)
    mutation: MutationArguments | None = None  # survivors argued equivalent (CUDA kernels)


class Control(Strict):
    """A planted-fault kernel that stands in for an entry's kernel and must go red at `gate`: the entry's own kernel
    with `patch` applied to its source, or a `kernel` of its own (which may take a `patch` too)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    entry: str
    kernel: KernelField | None = None  # default: the entry's kernel
    patch: str | None = None  # a unified diff of the kernel's source that plants the fault
    gate: GateNumber
    fault: str  # what was planted, one line
    timeout: float | None = Field(default=None, gt=0, le=86400)  # seconds its gate may take (default: the entry's)
    sanitize: Literal["memcheck", "racecheck", "initcheck", "synccheck"] | None = None  # must be red there too
    trials: int = Field(default=1, ge=1, le=1000)  # a race: its gate runs up to this many times, red at the first red


class KnownFinding(Strict):
    """An accepted entry x gate failure; counted, not failing."""

    entry: str
    gate: GateNumber
    reason: str = Field(min_length=1)


class Folders(Strict):
    """Where the contract's own files live, relative to it (and inside the folders it may read, as its kernel files
    are): CUDA sources `check` scans for unregistered __global__ functions, and launch records. Two contracts in one
    folder keep apart by giving their own."""

    kernels: list[str] = ["kernels"]
    records: str = "records"


class Contract(Strict):
    """The whole contract file."""

    version: Literal[1]
    seed: int = Field(ge=0, lt=2**63)
    targets: list[str] = list(DEFAULT_TARGETS)
    # `check` fails unless a receipt with rows covers this contract; "strict": rows judged by an earlier kcontract fail
    require_receipt: bool | Literal["strict"] = False
    folders: Folders = Folders()
    # folders beside the contract's own that its kernel files (sources, patches, headers) may lie in, relative to it
    include: list[str] = []
    kernels: dict[str, KernelRef] = {}  # named kernel references that entries and controls may use by name
    entries: list[Entry] = Field(min_length=1)
    controls: list[Control] = []
    known_findings: list[KnownFinding] = []

    @field_validator("targets")
    @classmethod
    def _targets_are_sms(cls, value: list[str]) -> list[str]:
        for sm in value:
            if not (sm.startswith("sm_") and sm[3:].rstrip("af").isdigit()):
                raise ValueError(f"a target SM like 'sm_90', given: {sm!r}")
        return value
