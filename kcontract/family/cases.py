"""Which of a family's cases a gate runs, through the gate table's suites."""

from __future__ import annotations

from kcontract.family.base import Family
from kcontract.gatetable import Suite, gate


def family_cases(family: Family, number: int) -> list[str]:
    """The family's cases for gate `number`'s suite ([] for a gate with no suite, or a suite it does not feed)."""
    suite = gate(number).suite
    return family.cases(suite) if suite is not None and suite in type(family).suites else []


def main_cases(family: Family) -> list[str]:
    """The entry's own cases: its realistic suite's, which sizes memory, lists and sanitizer runs go by."""
    return family.cases(Suite.REALISTIC) if Suite.REALISTIC in type(family).suites else []
