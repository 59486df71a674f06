"""The front doors stay thin: no function in commands/, the pytest plugin or the session has a cyclomatic
complexity above 10 (radon's count: every branch, loop, boolean operator and comprehension filter) or runs past
40 lines; no function of the receipts, the reports or the review is above 15. Each offender is named with its file,
line and measure."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIN = ("kcontract/commands", "kcontract/pytest_plugin", "kcontract/session")
MAX_COMPLEXITY = 10
MAX_LINES = 40
RECEIPTS = ("kcontract/receipts", "kcontract/report", "kcontract/review")  # the receipt's door and judges, reports
MAX_RECEIPT_COMPLEXITY = 15


def functions(folders: tuple[str, ...] = THIN):
    """(path relative to the root, radon's Function) for every function, method and closure of the folders."""
    radon = pytest.importorskip("radon.complexity", reason="radon is in the dev extra: pip install -e '.[dev]'")
    for folder in folders:
        for path in sorted((ROOT / folder).glob("*.py")):
            waiting = radon.cc_visit(path.read_text())
            while waiting:
                block = waiting.pop(0)
                waiting += [*getattr(block, "methods", []), *getattr(block, "closures", [])]
                if not hasattr(block, "methods"):  # a class's measure is its methods'
                    yield path.relative_to(ROOT), block


def test_no_function_of_the_front_doors_or_the_session_is_above_complexity_10():
    offenders = [f"{path}:{f.lineno} {f.fullname}: complexity {f.complexity}" for path, f in functions()
                 if f.complexity > MAX_COMPLEXITY]
    assert not offenders, "split these into named steps:\n" + "\n".join(offenders)


def test_no_function_of_the_front_doors_or_the_session_runs_past_40_lines():
    offenders = [f"{path}:{f.lineno} {f.fullname}: {f.endline - f.lineno + 1} lines" for path, f in functions()
                 if f.endline - f.lineno + 1 > MAX_LINES]
    assert not offenders, "split these into named steps:\n" + "\n".join(offenders)


def test_no_function_of_the_receipts_or_the_reports_is_above_complexity_15():
    offenders = [f"{path}:{f.lineno} {f.fullname}: complexity {f.complexity}" for path, f in functions(RECEIPTS)
                 if f.complexity > MAX_RECEIPT_COMPLEXITY]
    assert not offenders, "split these into named steps:\n" + "\n".join(offenders)
