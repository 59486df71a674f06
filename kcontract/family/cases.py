"""Which of a family's cases a gate runs, through the gate table's suites."""

from __future__ import annotations

from kcontract.family.base import Family
from kcontract.gatetable import Suite, gate


def family_cases(family: Family, number: int) -> list[str]:
    """The family's cases for gate `number`'s suite ([] for a gate with no suite, or a suite it does not feed)."""
    suite = gate(number).suite
    return family.cases(suite) if suite is not None and suite in type(family).suites else []


def selected_cases(family: Family, number: int, case: str | None) -> list[str]:
    """Gate `number`'s cases that `--case` picks: all where none is given; a prefixed name (`exact/m5`) picks that
    case alone; a bare name (`m5`) picks every case whose last part it is (`m5`, `exact/m5`)."""
    names = family_cases(family, number)
    if case is None:
        return names
    return [n for n in names if n == case or ("/" not in case and n.rpartition("/")[2] == case)]


def main_cases(family: Family) -> list[str]:
    """The entry's own cases: its realistic suite's, which sizes memory, lists and sanitizer runs go by."""
    return family.cases(Suite.REALISTIC) if Suite.REALISTIC in type(family).suites else []
