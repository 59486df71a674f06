"""The toolchain a test compiles with."""

from __future__ import annotations

import pytest

from kcontract.errors import EnvironmentProblem
from kcontract.toolchain.locate import find_toolchain


def toolchain():
    """This environment's toolchain, or a skip saying what is missing."""
    try:
        return find_toolchain()
    except EnvironmentProblem as problem:
        pytest.skip(problem.message)
