"""The package's shape: layers without cycles (import-linter), a core that speaks no family's words, controls as
patches of kernels that carry no fault hooks, and one table that gives gate numbers their meaning; test helpers
live in tests/helpers, tests/oracles and tests/doubles, never in a test module another imports."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kcontract.gatetable import TABLE, Kind
from tests.helpers.import_cycles import import_cycles

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kcontract"
FAMILY_WORDS = re.compile(r"attention|softmax|sdpa|flash|head_dim|\bheads\b|\bquer(y|ies)\b|\bmirrors?\b|"
                          r"\bwindows?\b|decode|prompt|\bkeys\b|\bkey head|merge rescale", re.IGNORECASE)
ALLOWED = re.compile(r"\.decode\(|UnicodeDecodeError|\.keys\(\)")  # bytes.decode and dict.keys are not words


def core_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if (PACKAGE / "families") not in p.parents)


def test_the_layers_hold_and_the_core_imports_no_family():
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra: pip install -e '.[dev]'")
    done = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports; "
                           "raise SystemExit(lint_imports(config_filename='pyproject.toml', no_cache=True))"],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 kept, 0 broken" in done.stdout


COMPILERS = {"kcontract.toolchain.build": {"build"}, "kcontract.toolchain.nvrtc": {"compile_cubin", "compile_job",
                                                                                "load", "Nvrtc"}}
BUILDERS = (PACKAGE / "builds", PACKAGE / "toolchain")  # Builds and its builders, and the toolchain they drive


def test_only_builds_compiles_and_opens_the_compile_cache():
    """Kernels compile in one place: no module outside kcontract/builds (and the toolchain it drives) imports the
    compile step or NVRTC, or opens a compile cache of its own; sass-diff builds each revision as a Builds, and a
    worker gets what it launches in its job (launch/ imports no toolchain module: import-linter's contract)."""
    found = []
    for path in core_files():
        if any(folder in path.parents for folder in BUILDERS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in COMPILERS:
                found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{a.name}"
                          for a in node.names if a.name in COMPILERS[node.module]]
            elif isinstance(node, ast.Import):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {a.name}" for a in node.names
                          if a.name in COMPILERS]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == \
                    "CompileCache":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} opens a CompileCache")
    assert not found, "ask kcontract.builds.builds.Builds instead:\n" + "\n".join(found)


def test_no_modules_import_one_another_in_a_circle():
    pytest.importorskip("grimp", reason="grimp comes with import-linter, in the dev extra: pip install -e '.[dev]'")
    assert import_cycles("kcontract") == []


def test_no_module_outside_the_families_names_a_family_term():
    found = []
    for path in core_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            text = ALLOWED.sub("", line)
            if FAMILY_WORDS.search(text):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def _named_gate(node) -> bool:
    """A name, attribute or keyword that speaks of a gate (`gate`, `gates`, `RECORDS_GATE`, `x.gate`)."""
    text = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
        node.arg if isinstance(node, ast.keyword) else getattr(node, "value", "")
    return isinstance(text, str) and "gate" in text.lower()


def _literal_numbers(node, numbers: set[int]) -> bool:
    """A literal gate number, or a tuple, list or set of them."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return any(isinstance(e, ast.Constant) and type(e.value) is int and e.value in numbers for e in items)


def test_no_module_outside_the_gate_table_names_a_gate_by_its_number():
    """Literal gate numbers live only in the gate table: no comparison, assignment, keyword, `gate(N)` call or
    `gates[N]` / `gates.get(N)` lookup elsewhere, in the core or a family."""
    numbers = {g.number for g in TABLE}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "gatetable.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            hit = False
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                hit = any(_named_gate(n) for n in sides) and any(_literal_numbers(n, numbers) for n in sides)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                hit = node.value is not None and any(_named_gate(t) for t in targets) and \
                    _literal_numbers(node.value, numbers)
            elif isinstance(node, ast.keyword):
                hit = _named_gate(node) and _literal_numbers(node.value, numbers)
            elif isinstance(node, ast.Call):
                func = node.func
                lookup = isinstance(func, ast.Attribute) and func.attr == "get" and _named_gate(func.value)
                hit = (_named_gate(func) or lookup) and any(_literal_numbers(a, numbers) for a in node.args)
            elif isinstance(node, ast.Subscript):
                hit = _named_gate(node.value) and _literal_numbers(node.slice, numbers)
            if hit:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:120]}")
    assert not found, "\n".join(found)


def test_the_gate_table_maps_every_number_to_one_kind_and_the_range_kind_to_three_suites():
    assert [g.number for g in TABLE] == [1, 2, 3, 4, 5]
    assert [g.number for g in TABLE if g.kind is Kind.RANGES] == [1, 3, 4]
    assert len({g.suite for g in TABLE if g.suite is not None}) == 4
    assert [g.number for g in TABLE if not g.launches] == [5]


def test_production_kernels_carry_no_fault_hooks_and_controls_include_none():
    hooks = re.compile(r"\b(WD|WF|WP)_[A-Z_]+\b")
    for source in sorted((ROOT / "kernels").glob("*.cu*")):
        assert not hooks.findall(source.read_text()), source.name
    contract = yaml.safe_load((ROOT / "contract.yaml").read_text())
    for control in contract["controls"]:
        if "patch" in control:
            patch = (ROOT / control["patch"]).read_text()
            assert patch.startswith("--- ") or patch.startswith("diff "), control["name"]
            assert "#include" not in "".join(l for l in patch.splitlines(True) if l.startswith("+")), control["name"]
    assert not [p for p in (ROOT / "controls").glob("*.cu")], "a control is a patch of a production kernel"


def test_no_test_module_imports_another():
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names
                      if n.rsplit(".", 1)[-1].startswith("test_") and n.startswith("tests.")]
    assert not found, "helpers belong in tests/helpers (or tests/oracles): " + "; ".join(found)


RECEIPT_DOOR = PACKAGE / "receipts" / "receipt.py"
FILE_CALLS = {"read_text", "write_text", "read_bytes", "write_bytes", "open", "load", "loads", "dump", "read_json",
              "write_json", "write_atomic", "atomic_writer", "flock"}  # what reads, parses, writes or locks a file
RECEIPT_MODULES = [*sorted((PACKAGE / "receipts").glob("*.py")), PACKAGE / "report" / "receipt.py",
                   PACKAGE / "commands" / "receipt_cmd.py", PACKAGE / "session" / "outputs.py"]


def _called(node: ast.Call) -> str:
    """The name a call calls: `f` of `f(...)`, `m` of `x.m(...)`."""
    return node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) \
        else ""


def _identifiers(nodes) -> set[str]:
    """Every name and attribute named within the nodes (`Path(options.receipt)`: Path, options, receipt)."""
    return {n.id if isinstance(n, ast.Name) else n.attr for node in nodes for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def _file_calls(tree: ast.Module) -> list[tuple[ast.Call, bool]]:
    """Each call that reads, parses, writes or locks a file, with whether a function named for a receipt makes it."""
    calls: dict[tuple[int, int], tuple[ast.Call, bool]] = {}
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        named = "receipt" in getattr(scope, "name", "").lower()
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and _called(node) in FILE_CALLS:
                key = (node.lineno, node.col_offset)
                calls[key] = (node, named or calls.get(key, (node, False))[1])
    return list(calls.values())


def test_only_the_receipt_module_reads_or_writes_a_receipt_file():
    """No call outside receipts/receipt.py reads, parses, writes or locks a file where the call names a receipt or
    a function named for one makes it, and the modules about receipts parse, dump or lock no file themselves:
    `Receipt` is the one door."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == RECEIPT_DOOR:
            continue
        for node, in_receipt_function in _file_calls(ast.parse(path.read_text())):
            receiver = [node.func.value] if isinstance(node.func, ast.Attribute) else []
            named = _identifiers([*receiver, *node.args, *(k.value for k in node.keywords)])
            if in_receipt_function or any("receipt" in name.lower() for name in named) or \
                    (path in RECEIPT_MODULES and _called(node) not in ("read_text", "write_text")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:120]}")
    assert not found, "read and write receipts through kcontract.receipts.receipt.Receipt:\n" + "\n".join(sorted(found))
