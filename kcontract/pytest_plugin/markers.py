"""The markers kcontract items carry: `kcontract`, `gpu`, `gate<N>` and `family_<name>`, registered for -m."""

from __future__ import annotations

import re

import pytest

from kcontract.gatetable import TABLE


def gate_marker(number: int) -> str:
    """`gate3`."""
    return f"gate{number}"


def family_marker(family: str) -> str:
    """`family_pkg_mod_Class` from a family name: every character that is not a letter, digit or '_' becomes '_'."""
    return "family_" + re.sub(r"\W", "_", family, flags=re.ASCII)


def _registered(config: pytest.Config) -> set[str]:
    """Marker names the ini file and plugins registered so far."""
    return {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}


def _register(config: pytest.Config, name: str, text: str) -> None:
    """Register a marker unless it already is (a project may register `gpu` itself)."""
    if name not in _registered(config):
        config.addinivalue_line("markers", f"{name}: {text}")


def register_static(config: pytest.Config) -> None:
    """`kcontract`, `gpu` and one marker per gate of the gate table."""
    _register(config, "kcontract", "an item of a kcontract contract (pytest --kcontract CONTRACT)")
    _register(config, "gpu", "needs a CUDA GPU (skipped with a reason where none is present)")
    for row in TABLE:
        _register(config, gate_marker(row.number), f"kcontract gate {row.number} ({row.title}), and controls "
                                                    f"planted at it")


def register_families(config: pytest.Config, runs) -> None:
    """One marker per family the loaded contracts use."""
    for run in runs:
        for entry in run.loaded.entries:
            _register(config, family_marker(entry.family_name), f"kcontract entries of family {entry.family_name}, "
                                                                f"and their controls")
