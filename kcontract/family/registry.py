"""Where families are found: installed plug-ins by name (the `kcontract.families` entry points, the shipped
families among them), or any importable `package.module:Class`."""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

from kcontract.family.base import Family
from kcontract.usercode import user_code

GROUP = "kcontract.families"


@functools.cache
def _plugins() -> dict[str, object]:
    """Installed families by name, not yet imported: the installed packages' metadata read once per process."""
    return {point.name: point for point in entry_points(group=GROUP)}


def family_names() -> list[str]:
    """Names of every installed family."""
    return sorted(_plugins())


def family_class(name: str) -> type[Family] | None:
    """The family class for a `family:` value, or None where there is none; `package.module:Class` loads one from
    anywhere. A family module that exists but fails to import raises its error (the loader shows it)."""
    point = _plugins().get(name)
    if point is not None:
        with user_code(f"importing family {name}"):
            found = point.load()
    elif ":" in name:
        module, _, attr = name.partition(":")
        try:
            with user_code(f"importing family {name}"):
                found = getattr(importlib.import_module(module), attr, None)
        except ModuleNotFoundError as error:
            if error.name and module.startswith(error.name):
                return None
            raise
    else:
        return None
    return found if isinstance(found, type) and issubclass(found, Family) else None
