"""The CUDA builder: NVRTC through the content-addressed compile cache (kcontract/toolchain)."""

from __future__ import annotations

import dataclasses
from typing import Callable

from kcontract.builds.cache_backed import CacheBacked
from kcontract.contract.model import CudaKernel
from kcontract.contract.paths import resolve_source
from kcontract.toolchain.build import PTX_FILE, Batch, Build, Module, build, read_inputs
from kcontract.toolchain.cache import inputs_digest
from kcontract.toolchain.exports import kernel_exports, name_expression
from kcontract.toolchain.locate import Toolchain, find_toolchain
from kcontract.toolchain.units import KernelUse, Unit, contract_uses, group_units


class CudaBuilder(CacheBacked):
    """CUDA kernels: one unit per source, options and patch, compiled by NVRTC for each SM, cache first."""

    kind = "cuda"

    def find(self) -> Toolchain:
        return find_toolchain()

    @property
    def compiler(self) -> str:
        """`nvrtc 13.0.88`: the compiler, for messages."""
        return f"nvrtc {self.toolchain.nvrtc.version}"

    def handles(self, kernel) -> bool:
        return isinstance(kernel, CudaKernel) or type(kernel) in (KernelUse, Unit)

    def uses(self, loaded) -> list[KernelUse]:
        return contract_uses(loaded)

    def group(self, uses: list[KernelUse]) -> list[Unit]:
        return group_units(uses)

    def ident(self, kernel) -> tuple:
        if isinstance(kernel, Unit):
            return kernel.ident
        return kernel.source, tuple(kernel.options), kernel.patch

    def alone(self, unit: Unit, kernel: CudaKernel) -> Unit:
        return dataclasses.replace(unit, expressions=tuple(dict.fromkeys(kernel.symbols.values())),
                                   exports=tuple(name_expression(v) for v in kernel.exports.values()))

    def build(self, units: list[Unit], sms: list[str] | dict[tuple, list[str]],
              progress: Callable[[Batch], None] | None = None) -> Build:
        return build(units, sms, self.cache, self.base, self.jobs, self.toolchain, progress, self.recompile)

    def resources(self, module: Module) -> dict[str, dict[str, int]]:
        return {name: found.as_dict() for name, found in module.resources().items()}

    def exports(self, module: Module, kernel: CudaKernel) -> dict[str, int]:
        return kernel_exports(module, kernel)

    def divisors(self, module: Module, kernel: CudaKernel) -> dict[str, dict[int, tuple[str, int]]]:
        """None: NVRTC assumes nothing of a kernel's arguments."""
        return {}

    def inputs_sha256(self, kernel: CudaKernel) -> str:
        """OSError where a file cannot be read, PatchError where the patch does not apply."""
        source, headers, _ = read_inputs(resolve_source(self.base, kernel.source), tuple(kernel.options), self.base,
                                         resolve_source(self.base, kernel.patch) if kernel.patch else None)
        return inputs_digest(source, headers, tuple(kernel.options))

    def ptx(self, unit: Unit, expressions: tuple[str, ...], sm: str) -> tuple[str | None, dict[str, str], str]:
        """The PTX of `unit` compiled with only `expressions` for `sm` (kept beside its cubin in the cache), the
        lowered names, and NVRTC's log where it does not compile (then the PTX is None)."""
        narrow = Unit(unit.label, unit.source, unit.options, tuple(expressions), unit.users, unit.patch_label,
                      unit.patch)
        built = build([narrow], [sm], self.cache, self.base, 1, self.toolchain, ptx=True)
        module = built.module(narrow, sm)
        if module is None:
            return None, {}, built.failures[0].log if built.failures else f"{self.toolchain.id} cannot build {sm}"
        return self.cache.text(module.key, PTX_FILE) or "", module.lowered, ""
