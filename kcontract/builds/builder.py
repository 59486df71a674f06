"""What `Builds` asks of a kernel kind: its builder groups the contract's uses of that kind into units, compiles
units for SMs through its cache, and reads a module's resources and exported constants. Callers speak to `Builds`
alone, so another kind (Triton's) plugs in as one more builder without touching them."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Protocol

from kcontract.toolchain.build import Batch, Build, Module


class Builder(Protocol):
    """One kernel kind's compiler behind `Builds`."""

    kind: str  # "cuda"

    def handles(self, kernel) -> bool:
        """Whether a kernel (a contract's kernel part, or a use of one) is this builder's kind."""

    def uses(self, loaded) -> list:
        """Every use of this kind's kernels in a loaded contract (its entries' and controls')."""

    def group(self, uses: list) -> list:
        """The units the uses compile as (one per source, options and patch, with every name any use gives it)."""

    def ident(self, kernel) -> tuple:
        """The ident of the unit a kernel compiles in."""

    def alone(self, unit, kernel):
        """`unit` holding only the names `kernel` gives it (its symbols and exports), not every use's."""

    @property
    def toolchain(self):
        """The toolchain it compiles with (its `id` is part of every cache key it makes)."""

    @property
    def compiler(self) -> str:
        """The compiler and its version (`nvrtc 13.0.88`), for messages."""

    def build(self, units: list, sms: list[str] | dict[tuple, list[str]],
              progress: Callable[[Batch], None] | None) -> Build:
        """Every unit for every SM of `sms` (or of `sms[unit.ident]`: SMs per unit, one batch) the toolchain builds
        for, through the cache."""

    def resources(self, module: Module) -> dict[str, dict[str, int]]:
        """Registers, shared memory, stack, spills and barriers per symbol of a module."""

    def exports(self, module: Module, kernel) -> dict[str, int]:
        """A kernel's exported constants (name -> value) as a module built for one SM holds them."""

    def divisors(self, module: Module, kernel) -> dict[str, dict[int, tuple[str, int]]]:
        """Per symbol of a module, what its compile assumed divides its arguments: argument position -> (parameter,
        divisor)."""

    def inputs_sha256(self, kernel) -> str:
        """The digest of what a kernel's launch record depends on (its source, headers and options)."""

    def cached(self, module: Module) -> Module | None:
        """Where it recompiles: the module its trusted cache holds under a recompiled module's key, or None."""

    def adopt(self, module: Module) -> None:
        """Where it recompiles: a recompiled module into the trusted cache, in place of what it held."""

    def rebased(self, base: Path) -> Builder:
        """The same builder for a contract folder elsewhere (another revision's), sharing the cache."""
