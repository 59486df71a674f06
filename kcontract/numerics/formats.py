"""Binary floating-point formats the kernels read and write: bf16, fp16, fp32."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Format:
    """An IEEE-style binary format: precision counts the implicit bit."""

    name: str
    precision: int
    emin: int
    emax: int
    bits: int  # storage width, 16 or 32

    @property
    def u(self) -> float:
        """Unit roundoff of round-to-nearest: 2**-precision."""
        return 2.0 ** -self.precision

    @property
    def max_finite(self) -> float:
        """Largest finite value: (2 - 2**(1 - precision)) * 2**emax."""
        return (2.0 - 2.0 ** (1 - self.precision)) * 2.0**self.emax

    @property
    def min_normal(self) -> float:
        """Smallest positive normal value: 2**emin."""
        return 2.0**self.emin

    @property
    def min_subnormal(self) -> float:
        """Smallest positive subnormal value: 2**(emin - precision + 1)."""
        return 2.0 ** (self.emin - self.precision + 1)

    @property
    def uint(self) -> type[np.unsignedinteger]:
        """Numpy unsigned integer type holding one bit pattern."""
        return np.uint16 if self.bits == 16 else np.uint32


FORMATS: dict[str, Format] = {
    "bf16": Format("bf16", precision=8, emin=-126, emax=127, bits=16),
    "fp16": Format("fp16", precision=11, emin=-14, emax=15, bits=16),
    "fp32": Format("fp32", precision=24, emin=-126, emax=127, bits=32),
}

def fmt(name_or_format: str | Format) -> Format:
    """The Format named (bf16, fp16, fp32) or given."""
    if isinstance(name_or_format, Format):
        return name_or_format
    try:
        return FORMATS[name_or_format]
    except (KeyError, TypeError):
        raise ValueError(f"unknown float format {name_or_format!r}; expected one of {sorted(FORMATS)}") from None
