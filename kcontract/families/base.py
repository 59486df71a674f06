"""The family protocol: what a kernel family tells the generic gates, and the family registry."""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel

from kcontract.problem import Checked, InvarianceSet


class Family(ABC):
    """A group of kernels sharing an ABI and mathematics: inputs, float64 reference, variant runs.

    Gates talk to a family through three questions: which cases a gate runs (`cases`), the checked
    problems of a range gate's case (`checks`), and the invariance sets of gate 2's case (`invariance`).
    A family feeds the gates it lists in `gates`; gate 5 (launch records) needs only `launch_shapes`.
    """

    name: ClassVar[str]  # the `family:` value in contract.yaml
    Spec: ClassVar[type[BaseModel]]  # the family's own YAML fields (shape, arithmetic, values, cases)
    gates: ClassVar[tuple[int, ...]]  # gates 1-4 this family feeds, the default for its entries
    abi: ClassVar[tuple[str, ...]] = ()  # argument names a Python kernel is called with, by keyword (kernel_abi)

    def __init__(self, entry: str, spec: BaseModel, seed: int):
        self.entry, self.spec, self.seed = entry, spec, seed
        self.store = None  # the run's on-disk cache (kcontract.refcache.ReferenceCache), set by the runner

    def memo(self, parts: tuple, make):
        """Drawn inputs named by `parts` (they depend on the seed and spec, never the kernel): cached on disk
        across runs when the runner gives a store, else made now."""
        return make() if self.store is None else self.store.memo(self, parts, make)

    def kernel_abi(self) -> tuple[str, ...]:
        """The argument names this entry's kernel takes: the family's `abi`, unless an entry picks its own."""
        return type(self).abi

    def cases(self, gate: int) -> list[str]:
        """The cases `gate` runs for this entry, in order (`--case` and replay commands name them)."""
        return []

    def checks(self, gate: int, case: str) -> Iterable[Checked]:
        """A range gate's problems for one case, each with per-output ranges."""
        return []

    def invariance(self, case: str) -> Iterable[InvarianceSet]:
        """Gate 2: a base run and variant runs that must give each base row's bits."""
        return []

    def launch_shapes(self) -> list[dict]:
        """Gate 5: each kernel symbol's default launch shape ({"symbol", "threads", "dynamic_smem"})."""
        return []

    def template_args(self) -> dict[str, int]:
        """Values a CUDA kernel reference's symbols may name as {placeholders}, e.g. {"head_dim": 512}."""
        return {}

    def case_traits(self, case: str) -> dict[str, object]:
        """Facts about a case a kernel's `instances` may restrict, e.g. {"window": "ring"}."""
        return {}

    def bench_calls(self, keys: list[int], rows: list[int]) -> list:
        """`kcontract bench`'s calls (kcontract.bench.call.BenchCall) at these context lengths and row counts."""
        return []

    def case_bytes(self, case: str) -> int:
        """Host bytes a worker holds for a case (drawn inputs, reference), for load-time refusal."""
        return 0

    def case_buffer_bytes(self, case: str) -> int:
        """Bytes of a case's calls' buffers as built where the kernel runs (host memory for a Python kernel)."""
        return 0


_REGISTRY: dict[str, type[Family]] = {}


def register(cls: type[Family]) -> type[Family]:
    """Class decorator: make a family available under its `name`."""
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    """Import every module under kcontract.families so their @register runs."""
    import kcontract.families as pkg

    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)


def family_names() -> list[str]:
    """Names of every registered family."""
    _discover()
    return sorted(_REGISTRY)


def family_class(name: str) -> type[Family] | None:
    """The family class for a `family:` value, or None; `pkg.module:Class` loads an external family."""
    _discover()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return None
    return None
