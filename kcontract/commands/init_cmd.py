"""`kcontract init`: register a kernel as a new entry of a contract (a new file, or appended to an existing one's
`entries`), its own fields from its family's template; nothing is written unless the result loads."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import click
import yaml
from pydantic import ValidationError

from kcontract.commands.common import contract_option, user_errors
from kcontract.contract.imports import add_import_roots, import_roots
from kcontract.contract.kernels import fill_symbols, one_line, python_kernel_problem
from kcontract.atomicfile import new_file_mode
from kcontract.contract.model import PYTHON_TARGET, CudaKernel, Entry, KernelRef
from kcontract.contract.paths import inside
from kcontract.contract.yaml_lines import LineLoader, load_yaml
from kcontract.errors import ContractError, KContractError, UsageError
from kcontract.exitcodes import ExitCode
from kcontract.family.base import Family
from kcontract.family.registry import family_class, family_names
from kcontract.session.session import Session

NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
HEADER = """\
# The kernel contract: each entry is a kernel under test and what it must compute; `kcontract run` checks them.
# `kcontract init` adds entries (`kcontract init --list-families` lists the families); edit them by hand freely.
version: 1
seed: 1  # inputs are drawn from the seed and each entry's fields, never from the kernel
entries:
"""


@click.command("init", short_help="Register a kernel in a contract (new or existing).")
@contract_option
@click.option("--family", "family_name", metavar="NAME", help="The kernel's family: an installed one "
              "(--list-families) or package.module:Class.")
@click.option("--python", "python_target", metavar="MODULE:FUNCTION", help="A Python kernel.")
@click.option("--cuda", "cuda_source", metavar="FILE.cu", help="A CUDA kernel's source.")
@click.option("--function", "functions", multiple=True, metavar="[ROLE=]NAME",
              help="The CUDA kernel's __global__ function (ROLE=NAME for each launch of a family that has several); "
                   "it may name the family's template arguments as {placeholders}.")
@click.option("--name", "entry_name", help="The entry's name (default: the function's).")
@click.option("--device", is_flag=True, help="The Python kernel takes CuPy device arrays.")
@click.option("--list-families", is_flag=True, help="List the installed families and exit.")
@user_errors
def init_command(contract_path: str, family_name: str | None, python_target: str | None, cuda_source: str | None,
                 functions: tuple[str, ...], entry_name: str | None, device: bool, list_families: bool) -> None:
    """Add an entry for a kernel to the contract, with its family's fields and one small case, validated by
    loading the result; prints what it wrote and the commands to run next."""
    if list_families:
        _print_families(click.echo)
        return
    try:
        _init(contract_path, family_name, python_target, cuda_source, functions, entry_name, device)
    except KContractError as error:  # printed plainly: names like `pkg.mod:Class:` are no markup or emoji
        for line in error.lines():
            click.echo(f"ERROR: {line}", err=True)
        sys.exit(int(error.exit_code))


def _init(contract_path: str, family_name: str | None, python_target: str | None, cuda_source: str | None,
          functions: tuple[str, ...], entry_name: str | None, device: bool) -> None:
    """Check the options, compose the entry, write the contract if it loads, and say what was done."""
    target = _target(contract_path, family_name)
    add_import_roots(target)  # families and kernels import as the contract will import them
    cls = _family(family_name)
    _check_options(python_target, cuda_source, functions, device)
    taken = _entry_names(contract_path) if target.exists() else {}  # it loads, so it reads as UTF-8
    existing = target.read_text(encoding="utf-8") if target.exists() else None
    name = _new_name(contract_path, entry_name or _default_name(python_target, cuda_source, functions), taken)
    template, family = _template(cls, family_name, name)
    if python_target is not None:
        kernel = _python_kernel(python_target, device, family, target)
    else:
        kernel = _cuda_kernel(cuda_source, functions, family, target.parent)
    entry = [f"name: {_scalar(name)}", f"family: {_scalar(family_name)}", *kernel, *template.splitlines()]
    header = _header(cuda_source, target.parent)
    text = header + _item(entry, 2, 4) if existing is None else _appended(existing, entry, contract_path)
    _write(text, target, contract_path)
    _report(contract_path, name, family_name, kernel, template, existing is None, cuda_source is not None)


def _header(cuda_source: str | None, folder: Path) -> str:
    """A new contract's first lines: with `include:` naming the CUDA source's folder where it lies outside the
    contract's (an existing contract must name it itself, or its loading says so)."""
    if cuda_source is None or inside(Path(cuda_source), [folder]):
        return HEADER
    relative = Path(os.path.relpath(Path(cuda_source).resolve().parent, folder)).as_posix()
    return HEADER.replace("\nentries:\n", f"\ninclude: [{_scalar(relative)}]  # the kernel's folder, outside this "
                                          f"contract's\nentries:\n")


def _target(contract_path: str, family_name: str | None) -> Path:
    """The contract file to write, once a family is named and its folder exists."""
    if not family_name:
        raise UsageError("--family NAME is required: `kcontract init --list-families` lists them, or give "
                         "package.module:Class")
    target = Path(contract_path).resolve()
    if not target.parent.is_dir():
        raise UsageError(f"--contract {contract_path}: no folder {target.parent}; create it or give another path")
    if target.is_dir():
        raise UsageError(f"--contract {contract_path}: is a directory; give a file name")
    return target


def _new_name(contract_path: str, name: str, taken: dict[str, int | None]) -> str:
    """The entry's name: a valid one that the contract does not have yet."""
    if not NAME.match(name):
        raise UsageError(f"--name {name}: an entry name of letters, digits, '_', '.' and '-'; pass --name NAME")
    if name in taken:
        raise UsageError(f"--name {name}: {contract_path}:{taken[name] or 1} already has an entry {name!r}; pass "
                         f"--name with another name (nothing written)")
    return name


def _check_options(python_target, cuda_source, functions, device) -> None:
    """The kernel options' combinations."""
    if (python_target is None) == (cuda_source is None):
        raise UsageError("give exactly one kernel: --python MODULE:FUNCTION or --cuda FILE.cu --function NAME")
    if cuda_source is not None and not functions:
        raise UsageError(f"--cuda {cuda_source}: also give --function NAME, its __global__ function")
    if python_target is not None and functions:
        raise UsageError("--function goes with --cuda; a Python kernel is named by --python MODULE:FUNCTION")
    if device and python_target is None:
        raise UsageError("--device goes with --python (a Python kernel that takes CuPy device arrays)")


def _family(name: str) -> type[Family]:
    """The family class, or ERROR with the families available and exit 2."""
    try:
        cls = family_class(name)
    except Exception as error:  # noqa: BLE001 - a broken family module: say where, not a traceback
        raise UsageError(f"--family {name}: importing it raised {one_line(error)}; fix the family module") from None
    if cls is None:
        click.echo(f"ERROR: --family {name}: no such family; installed: {', '.join(family_names()) or 'none'}, "
                   f"or give package.module:Class (a Family subclass importable from the contract's folder or "
                   f"project)", err=True)
        _print_families(lambda line: click.echo(line, err=True))
        sys.exit(int(ExitCode.USAGE))
    if inspect.isabstract(cls):
        raise UsageError(f"--family {name}: an abstract class; give a family that implements every method")
    return cls


def _print_families(show) -> None:
    """One line per installed family: its name and what it checks."""
    names = family_names()
    width = max((len(n) for n in names), default=0)
    for name in names:
        try:
            cls = family_class(name)
            doc = _summary(cls.__doc__ if cls is not None else None)
        except Exception as error:  # noqa: BLE001 - a broken plug-in is listed, not a traceback
            doc = f"(does not import: {one_line(error)})"
        show(f"  {name:<{width}}  {doc}")
    show("  or any family class as package.module:Class (docs/families.md)")


def _summary(doc: str | None, width: int = 100) -> str:
    """A docstring's first sentence on one line, cut at a word to `width` characters."""
    text = " ".join((doc or "").split("\n\n", 1)[0].split()).split(". ", 1)[0]
    return text if len(text) <= width else text[:width - 3].rsplit(" ", 1)[0] + "..."


def _entry_names(contract_path: str) -> dict[str, int | None]:
    """The existing contract's entry names and lines; it must load before anything is added to it."""
    try:
        loaded = Session(contract_path).loaded
    except ContractError as error:
        raise UsageError(f"{error.message}; the existing contract must load before an entry is added: fix it first "
                         f"(nothing written)") from None
    return {e.name: e.line for e in loaded.entries}


def _default_name(python_target: str | None, cuda_source: str | None, functions: tuple[str, ...]) -> str:
    """The function's name (the source's, for several functions), as an entry name."""
    if python_target:
        base = python_target.rpartition(":")[2]
    else:
        base = functions[0].rpartition("=")[2] if len(functions) == 1 else Path(cuda_source).stem
    return re.sub(r"[^A-Za-z0-9_.-]", "_", re.split(r"[<(\s]", base.strip(), maxsplit=1)[0]) or "kernel"


def _template(cls: type[Family], family_name: str, entry: str) -> tuple[str, Family]:
    """The family's template text and a family built from it (for its ABI, launches and template arguments)."""
    try:
        text = cls.template()
    except NotImplementedError as error:
        raise UsageError(f"--family {family_name}: {error}") from None
    label = f"family {family_name}'s template"
    try:
        data = load_yaml(label, text).data
    except ContractError as error:
        raise UsageError(f"{error.message}; the family must be fixed") from None
    clash = sorted(set(data) & set(Entry.model_fields)) if isinstance(data, dict) else []
    if not isinstance(data, dict) or clash:
        raise UsageError(f"{label}: a mapping of the family's own fields, given: "
                         f"{'the generic fields ' + ', '.join(clash) if clash else 'no mapping'}; the family must "
                         f"be fixed")
    try:
        spec = cls.Spec.model_validate_json(json.dumps(data), strict=True)
        family = cls(entry, spec, 0)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UsageError(f"{label} does not load ({where}: {first['msg']}); the family must be fixed") from None
    except ValueError as error:
        raise UsageError(f"{label} does not load ({error}); the family must be fixed") from None
    return text, family


def _python_kernel(target: str, device: bool, family: Family, contract: Path) -> list[str]:
    """The entry's kernel line for a Python kernel that imports and takes the family's ABI."""
    if not re.match(PYTHON_TARGET, target):
        raise UsageError(f"--python {target}: give module:function, e.g. mypkg.kernels:rmsnorm")
    why = python_kernel_problem(KernelRef(python=target, device=device), family.kernel_abi())
    if why:
        roots = import_roots(contract)
        top = target.split(".", 1)[0].split(":", 1)[0]
        here = Path.cwd()
        beside = (here / top).is_dir() or (here / f"{top}.py").is_file()
        hint = (f"; it is in the current folder {here}, which is not one of them: put the contract in this project"
                if "no module named" in why and here not in roots and beside else "")
        raise UsageError(f"--python {target}: expected {why}; the contract's import roots: "
                         f"{', '.join(map(str, roots))}{hint}")
    return [f"kernel: {{python: {json.dumps(target)}{', device: true' if device else ''}}}"]


def _cuda_kernel(source: str, functions: tuple[str, ...], family: Family, folder: Path) -> list[str]:
    """The entry's kernel lines for a CUDA source: a symbol per launch role of the family."""
    path = Path(source).resolve()
    if not path.is_file():
        raise UsageError(f"--cuda {source}: no such file (from {Path.cwd()}); give the kernel's .cu source")
    roles = [shape.role for shape in family.launch_shapes()]
    symbols = _symbols(functions, roles, family.name)
    args = family.template_args()
    _, why = fill_symbols(CudaKernel(source=source, symbols=symbols), args)
    if why:
        raise UsageError(f"--function: {why}")
    text = path.read_text(errors="replace")
    for expression in symbols.values():
        base = re.split(r"[<(\s]", expression.strip(), maxsplit=1)[0]
        if not re.search(rf"\b{re.escape(base)}\b", text):
            raise UsageError(f"--function {expression}: {source} has no `{base}`; give its __global__ function's "
                             f"name")
    relative = Path(os.path.relpath(path, folder)).as_posix()
    shown = ", ".join(f"{role}: {json.dumps(expr)}" for role, expr in symbols.items())
    return ["kernel:", "  cuda:", f"    source: {_scalar(relative)}", f"    symbols: {{{shown}}}"]


def _symbols(functions: tuple[str, ...], roles: list[str], family: str) -> dict[str, str]:
    """`--function` values as {role: name expression}: a bare NAME where the family launches one kernel."""
    needed = f"--function ROLE=NAME for each of {', '.join(roles)}"
    if len(functions) == 1 and len(roles) == 1 and not re.match(r"^\w+=", functions[0]):
        return {roles[0]: functions[0]}
    symbols = dict(_role_symbol(given, roles, family, needed) for given in functions)
    missing = [role for role in roles if role not in symbols]
    if missing:
        raise UsageError(f"--function: no function for {', '.join(missing)}; give {needed}")
    return symbols


def _role_symbol(given: str, roles: list[str], family: str, needed: str) -> tuple[str, str]:
    """`ROLE=NAME` as (role, name expression), the role one the family launches."""
    role, sep, expression = given.partition("=")
    if not sep or not re.fullmatch(r"\w+", role):
        raise UsageError(f"--function {given}: family {family} launches {len(roles)} kernels per call; give {needed}")
    if role not in roles:
        raise UsageError(f"--function {given}: family {family} has no launch {role!r}; give {needed}")
    return role, expression.strip()


def _scalar(value: str) -> str:
    """A YAML scalar that reads back as this string: plain where it does, else double-quoted."""
    try:
        plain = re.fullmatch(r"[\w./:-]+", value) and LineLoader(value).get_single_data() == value
    except yaml.YAMLError:
        plain = False
    return value if plain else json.dumps(value)


def _item(lines: list[str], dash: int, body: int) -> str:
    """An entry as a YAML list item, its first line after `- ` at column `dash`, the rest at `body`."""
    first, *rest = lines
    indented = [f"{' ' * body}{line}" if line.strip() else "" for line in rest]
    return "\n".join([f"{' ' * dash}-{' ' * (body - dash - 1)}{first}", *indented]) + "\n"


def _appended(text: str, entry: list[str], contract_path: str) -> str:
    """The existing text with the entry after the last line of its `entries` list, comments and all kept."""
    lines = load_yaml(contract_path, text).lines
    rows = text.splitlines(keepends=True)
    start = lines["entries"]
    dash, body = _list_columns(rows, start, lines.get("entries[0]"), contract_path)
    last = _list_last_row(rows, lines, start)
    newline = "\r\n" if "\r\n" in text else "\n"
    before = "".join(rows[:last + 1])
    if not before.endswith(("\n", "\r")):
        before += newline
    added = newline + _item(entry, dash, body).replace("\n", newline)
    return before + added + "".join(rows[last + 1:])


def _list_columns(rows: list[str], start: int, first: int | None, contract_path: str) -> tuple[int, int]:
    """The columns of the `entries` block list's dash and item body; a usage error for another layout."""
    head = rows[start - 1].split("#", 1)[0].split(":", 1)[1].strip() if start <= len(rows) else ""
    item = rows[first - 1] if first else ""
    if head or not item.lstrip().startswith("-"):
        raise UsageError(f"{contract_path}:{start}: entries: a block list (`- name: ...` items) to append to, given: "
                         f"{head or 'another layout'}; add the entry by hand (nothing written)")
    dash = len(item) - len(item.lstrip())
    after = item.lstrip()[1:]
    return dash, dash + 1 + len(after) - len(after.lstrip(" "))


def _list_last_row(rows: list[str], lines: dict, start: int) -> int:
    """The index of the `entries` list's last row that is not blank or a comment."""
    tops = [line for path, line in lines.items() if path and not re.search(r"[.\[]", path) and line > start]
    end = min(tops) - 1 if tops else len(rows)  # rows[start:end] hold the list (1-based lines start+1..end)
    return max((i for i in range(start, end) if rows[i].strip() and not rows[i].startswith("#")), default=start - 1)


def _write(text: str, target: Path, contract_path: str) -> None:
    """Load the would-be contract from a file beside the target, then move it into place; else nothing written."""
    try:
        with tempfile.NamedTemporaryFile("w", dir=target.parent, prefix=f".{target.name}.", suffix=".init.yaml",
                                         delete=False, encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as error:
        raise UsageError(f"--contract {contract_path}: cannot write in {target.parent} ({error.strerror})") from None
    temp = Path(handle.name)
    try:
        try:
            Session(str(temp))
        except ContractError as error:
            message = error.message.replace(str(temp), contract_path)
            raise UsageError(f"{message} (in the would-be contract; nothing written)") from None
        if target.exists():
            shutil.copymode(target, temp)
        else:
            os.chmod(temp, new_file_mode())  # as the user's editor would create it, not mkstemp's 0600
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def _report(contract_path: str, name: str, family: str, kernel: list[str], template: str, new: bool,
            cuda: bool) -> None:
    """What was written, and the commands to run next."""
    how = "a new contract" if new else "appended to its entries"
    click.echo(f"wrote entry {name} (family {family}) to {contract_path} ({how}); edit its fields to your kernel's "
               f"shapes and cases:")
    click.echo(_item([f"name: {name}", f"family: {family}", *kernel, *template.splitlines()], 2, 4).rstrip("\n"))
    flag = shlex.quote(contract_path)
    steps = [f"kcontract list --contract {flag}"]
    if cuda:
        steps.append(f"kcontract records --contract {flag} --update   # compile it, write its launch records")
    steps.append(f"kcontract run --contract {flag} --only {shlex.quote(name)}" + ("   # on a GPU" if cuda else ""))
    if not cuda:
        steps.append(f"kcontract check --contract {flag}   # once a control plants a fault in {name} "
                     f"(docs/kernel-contract.md, section 4)")
    click.echo("next:")
    for step in steps:
        click.echo(f"  {step}")
