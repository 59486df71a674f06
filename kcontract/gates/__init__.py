"""Generic gates, one module each; each module defines NUMBER, TITLE and run(ctx) -> GateResult."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def _discover() -> dict[int, ModuleType]:
    """Every module of this package that defines a gate, by number."""
    import kcontract.gates as pkg

    found: dict[int, ModuleType] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        if hasattr(module, "NUMBER") and hasattr(module, "run"):
            found[module.NUMBER] = module
    return dict(sorted(found.items()))


GATES = _discover()
