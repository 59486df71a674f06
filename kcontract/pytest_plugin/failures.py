"""How a failed item reads: kcontract's own lines in place of a traceback, and the warning of a stale finding."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


class KcontractFailure(Exception):
    """A red gate or a missed control: carries kcontract's lines, shown instead of a traceback."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class KnownFindingPasses(pytest.PytestWarning):
    """A known finding of the contract whose gate passes now."""


@dataclass
class Crash:
    """Where a failure is and its first line, as pytest's short summary and JUnit's message read them."""

    path: str
    lineno: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.message}"

    def toterminal(self, tw) -> None:
        tw.line(str(self))


class FailureRepr:
    """kcontract's lines for a failed item, printed as they are (pytest reads any object with `toterminal`)."""

    def __init__(self, text: str, crash: Crash):
        self.text, self.reprcrash = text, crash

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text
