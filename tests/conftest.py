"""Shared pytest settings and fixtures: no Hypothesis deadline, since a loaded 2-core CI machine stalls at random;
one whole run of the CPU contract for the tests that read one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import settings

settings.register_profile("kcontract", deadline=None, print_blob=True)
settings.load_profile("kcontract")


@pytest.fixture(scope="session")
def cpu_contract_run(tmp_path_factory) -> SimpleNamespace:
    """The CPU contract run whole by the installed console script from the repository root, at 80 columns with no
    terminal, writing a JSON report and a receipt: proc, report and receipt."""
    from tests.helpers.cli import kcontract

    folder = tmp_path_factory.mktemp("cpu_run")
    report, receipt = folder / "run.json", folder / "whole.json"
    proc = kcontract("run", "--contract", "tests/contracts/cpu.yaml", "--jobs", "2", "--json", str(report),
                     "--receipt", str(receipt))
    return SimpleNamespace(proc=proc, report=report, receipt=receipt)
