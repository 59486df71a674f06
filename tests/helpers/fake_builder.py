"""A builder of another kernel kind, as a Triton builder would plug in beside CUDA's: its kernels are text files
whose "machine code" is the text itself, one module per file and SM."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kcontract.toolchain.build import Build, Module


@dataclass(frozen=True)
class TextKernel:
    """A kernel of the other kind: a file and the symbols it defines."""

    source: str
    symbols: dict
    exports: dict
    launch: dict | None = None


@dataclass(frozen=True)
class TextUnit:
    """One file, compiled for each SM."""

    source: Path
    names: tuple[str, ...]

    @property
    def ident(self) -> tuple:
        return ("text", str(self.source))

    @property
    def shown(self) -> str:
        return self.source.name

    @property
    def expressions(self) -> tuple[str, ...]:
        return self.names


@dataclass(frozen=True)
class _Toolchain:
    id: str = "text-1"

    def builds(self, sm: str) -> bool:
        return True


class TextBuilder:
    """Compiles a TextKernel by copying its file, counting every compile."""

    kind = "text"

    def __init__(self, out: Path):
        self.out, self.compiles = out, []
        self.toolchain, self.compiler = _Toolchain(), "text 1"

    def handles(self, kernel) -> bool:
        return isinstance(kernel, (TextKernel, TextUnit))

    def uses(self, loaded) -> list:
        return []

    def group(self, uses: list) -> list[TextUnit]:
        return [TextUnit(Path(k.source), tuple(sorted(k.symbols.values()))) for k in uses]

    def ident(self, kernel) -> tuple:
        return kernel.ident if isinstance(kernel, TextUnit) else ("text", str(Path(kernel.source)))

    def build(self, units: list, sms, progress=None) -> Build:
        built = Build(self.toolchain)
        for unit in units:
            for sm in sms[unit.ident] if isinstance(sms, dict) else sms:
                self.compiles.append((unit.shown, sm))
                path = self.out / f"{unit.source.stem}.{sm}.txt"
                path.write_bytes(unit.source.read_bytes() + sm.encode())
                key = hashlib.sha256(path.read_bytes()).hexdigest()
                built.modules[(unit.ident, sm)] = Module(unit, sm, key, path, {n: f"text_{n}" for n in unit.names},
                                                         "", False, self.toolchain.id)
        return built

    def resources(self, module: Module) -> dict:
        return {name: {"registers": 1} for name in module.lowered.values()}

    def divisors(self, module: Module, kernel) -> dict:
        return {}

    def exports(self, module: Module, kernel) -> dict:
        return {}

    def inputs_sha256(self, kernel) -> str:
        return hashlib.sha256(Path(kernel.source).read_bytes()).hexdigest()
