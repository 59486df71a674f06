"""The family written outside the package in examples/rowsum, as docs/families.md builds it: it runs end to end
through the installed CLI, a suite it has no cases for is skipped and says so, and its receipts and another
family's never stale each other."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rowsum"
KCONTRACT = [sys.executable, "-m", "kcontract"]
SUMMARY = ("SUMMARY 1 kernels: 1 pass gates 1-4, 0 fail, 0 known findings; 4 controls: 4 red as planted, 0 missed; "
           "0 limit problems")


def kcontract(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*KCONTRACT, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The example, copied so runs write their caches and receipts beside the copy."""
    folder = tmp_path / "rowsum"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".kcontract-cache", "receipts"))
    return folder


def test_the_example_family_runs_end_to_end_with_its_controls_red(example):
    done = kcontract("run", "--contract", "contract.yaml", "--jobs", "2", "--receipt", "receipts/contract-cpu.json",
                     cwd=example)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == SUMMARY
    for gate, title in ((1, "exactness vs float64"), (2, "order independence"), (3, "split-merge stress"),
                        (4, "exact-sum inputs")):
        assert f"rowsum_np gate {gate} {title}: pass" in done.stdout
    checked = kcontract("receipt", "check", "--contract", "contract.yaml", cwd=example)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_suite_with_no_cases_is_skipped_and_says_so(example):
    contract = example / "contract.yaml"
    contract.write_text(contract.read_text().replace("{name: long, length: 4096, rows: 4}",
                                                     "{name: long, length: 900, rows: 4}"))
    done = kcontract("run", "--contract", "contract.yaml", "--jobs", "1", "--no-controls", cwd=example)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ("rowsum_np gate 3 split-merge stress: skip, nothing ran, 0.0 s (family rowsum has no stress cases for "
            "gate 3 (split-merge stress))") in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("SUMMARY 1 kernels: 1 pass gates 1-4, 0 fail")


def _twin(example: Path) -> None:
    """A second, independent family beside the first: the example's family copied as `colsum`, with its own
    contract in the same folder."""
    shutil.copytree(example / "rowsum", example / "colsum")
    family = example / "colsum" / "family.py"
    family.write_text(family.read_text().replace('name = "rowsum"', 'name = "colsum"'))
    (example / "other.yaml").write_text((example / "contract.yaml").read_text()
                                        .replace("rowsum.family:RowSum", "colsum.family:RowSum"))


def _current(example: Path, contract: str, *args: str) -> subprocess.CompletedProcess:
    return kcontract("receipt", "check", "--contract", contract, *args, cwd=example)


def test_editing_one_family_stales_its_receipts_and_no_other_familys(example):
    _twin(example)
    for contract, receipt in (("contract.yaml", "contract-cpu"), ("other.yaml", "other-cpu")):
        done = kcontract("run", "--contract", contract, "--jobs", "2", "--receipt", f"receipts/{receipt}.json",
                         cwd=example)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _current(example, "contract.yaml").returncode == 0 and _current(example, "other.yaml").returncode == 0

    colsum = example / "colsum" / "family.py"
    colsum.write_text(colsum.read_text() + "# an edit to the other family\n")
    untouched = _current(example, "contract.yaml")
    assert untouched.returncode == 0 and "earlier" not in untouched.stdout  # rowsum's rows are untouched
    earlier = _current(example, "other.yaml")
    assert earlier.returncode == 0 and re.search(r"rows? of \d+ judged by an earlier kcontract \(family colsum \w+, "
                                                 r"now \w+\)", earlier.stdout), earlier.stdout
    assert _current(example, "other.yaml", "--strict").returncode == 1

    rowsum = example / "rowsum" / "family.py"
    rowsum.write_text(rowsum.read_text() + "# an edit to the first family\n")
    strict = _current(example, "contract.yaml", "--strict")
    assert strict.returncode == 1 and "(family rowsum " in strict.stdout
    assert "colsum" not in strict.stdout + strict.stderr


def test_the_shipped_families_are_no_part_of_the_core_identity():
    from kcontract.identity import FAMILIES, core_files

    assert core_files() and not [p for p in core_files() if FAMILIES in p.parents]
