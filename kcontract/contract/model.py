"""The contract file's generic schema; each family validates its own fields (Family.Spec)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_121")
GateNumber = Literal[1, 2, 3, 4, 5]


class Strict(BaseModel):
    """Base: unknown keys are errors, values keep their YAML types."""

    model_config = ConfigDict(extra="forbid", strict=True)


class PythonKernel(Strict):
    """A kernel reachable from Python: `module:function`, called with the family's ABI buffers."""

    python: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class CudaKernel(Strict):
    """A CUDA kernel: its source file and the family's symbols (template instantiations)."""

    source: str
    symbols: dict[str, str]  # ABI role (e.g. partials, merge) -> name expression
    options: list[str] = []


class KernelRef(Strict):
    """Which kernel runs: exactly one of `python` or `cuda`."""

    python: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    cuda: CudaKernel | None = None

    def launcher(self) -> str:
        """The launcher kind this reference needs."""
        return "python" if self.python is not None else "cuda"


class Entry(BaseModel):
    """One kernel configuration under test; family-specific keys are validated by the family."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    family: str
    kernel: KernelRef
    gates: list[GateNumber] | None = None  # default: every gate the family feeds
    timeout: float = Field(default=300.0, gt=0)  # seconds for the whole entry in its worker
    description: str = ""

    def family_fields(self) -> dict[str, Any]:
        """The keys left for the family's Spec."""
        return dict(self.model_extra or {})


class Control(Strict):
    """A planted-fault kernel that stands in for an entry's kernel and must go red at `gate`."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    entry: str
    kernel: KernelRef
    gate: GateNumber
    fault: str  # what was planted, one line
    timeout: float | None = Field(default=None, gt=0)


class KnownFinding(Strict):
    """An accepted entry x gate failure; counted, not failing."""

    entry: str
    gate: GateNumber
    reason: str = Field(min_length=1)


class Contract(Strict):
    """The whole contract file."""

    version: Literal[1]
    seed: int = Field(ge=0, lt=2**63)
    targets: list[str] = list(DEFAULT_TARGETS)
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
