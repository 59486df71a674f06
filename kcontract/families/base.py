"""The family protocol: what a kernel family tells the generic gates, and the family registry."""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from typing import ClassVar

from pydantic import BaseModel

from kcontract.problem import Checked, InvarianceSet


class Family(ABC):
    """A group of kernels sharing an ABI and mathematics: inputs, float64 reference, variant runs."""

    name: ClassVar[str]  # the `family:` value in contract.yaml
    Spec: ClassVar[type[BaseModel]]  # the family's own YAML fields (shape, arithmetic, values, cases)
    gates: ClassVar[tuple[int, ...]]  # gates this family can feed, the default for its entries

    def __init__(self, entry: str, spec: BaseModel, seed: int):
        self.entry, self.spec, self.seed = entry, spec, seed

    @abstractmethod
    def case_names(self) -> list[str]:
        """The entry's declared cases, in order."""

    @abstractmethod
    def exactness(self, case: str) -> list[Checked]:
        """Gate 1: realistic inputs for a case with rigorous per-output ranges."""

    @abstractmethod
    def invariance(self, case: str) -> list[InvarianceSet]:
        """Gate 2: a base run and variant runs that must give each base row's bits."""

    def merge_stress(self) -> list[Checked]:
        """Gate 3: inputs whose chunk maxima differ wildly, with gate 1's ranges."""
        return []

    def mirrors(self) -> list[Checked]:
        """Gate 4: inputs on which all arithmetic is exact, with exact expectations."""
        return []

    def launch_shapes(self) -> list[dict]:
        """Gate 5: each kernel symbol's launch shape (threads, dynamic shared memory) for its records."""
        return []


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
