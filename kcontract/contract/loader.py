"""Read a contract file into a LoadedContract; every mistake is a ContractError at its file:line."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import re
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from kcontract.contract.imports import add_import_roots, import_roots
from kcontract.contract.argued_lines import argued_line_problems
from kcontract.contract.kernels import (fill_launch, fill_symbols, instance_problem, one_line, only_launched,
                                       python_kernel_problem)
from kcontract.contract.loaded import LoadedContract, LoadedControl, LoadedEntry
from kcontract.contract.model import CompiledKernel, Contract, Entry, KernelRef
from kcontract.contract.patches import PatchError, apply
from kcontract.contract.triton_symbols import shape_problem, symbol_problem, with_default_launch
from kcontract.contract.yaml_lines import join, line_of, load_yaml
from kcontract.errors import ContractError
from kcontract.family.base import Family
from kcontract.family.registry import family_class, family_names
from kcontract.gatetable import NUMBERS, Kind, Suite, fed_by, gate
from kcontract.capacity import physical_memory, size_text
from kcontract.contract.paths import inside, option_paths, readable_folders, resolve_source

Parts = list  # a field path as field names and indices: ["entries", 2, "cases", 0, "rows"]

_WORDS = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "finite_number": "a finite number",
    "none_required": "null",
}
_CONSTRAINTS = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="),
                "less_than": ("lt", "<"), "less_than_equal": ("le", "<=")}
_PATTERNS = {
    r"^[A-Za-z0-9_.-]+$": "a name of letters, digits, '_', '.' and '-'",
    r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$": "a Python kernel as module:function (e.g. 'mypkg.kernels:rmsnorm')",
}
_TYPE_TAGS = {"str", "int", "float", "bool", "none", "bytes", "list", "dict", "tuple"}


MAX_BYTES = 4 * 2**20  # a contract file's size at most; larger ones are refused before parsing


def load_contract(path: str, *, import_kernels: bool = True) -> LoadedContract:
    """Parse, validate and resolve a contract file; Python kernels are imported and checked unless told not to."""
    with _no_collection():
        return _load(path, import_kernels)


@contextlib.contextmanager
def _no_collection():
    """The cyclic garbage collector paused: a large contract's many small objects (YAML nodes, models) set it off
    over and over, scanning the whole heap each time, though they form no cycles that outlive the load."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load(path: str, import_kernels: bool) -> LoadedContract:
    """load_contract's steps."""
    text = _read(path)
    add_import_roots(path)
    doc = load_yaml(path, text)
    data, lines = doc.data, doc.lines
    if data is None:
        raise ContractError(path, None, "", "a contract; the file is empty (expected version, seed and entries)")
    if not isinstance(data, dict):
        raise ContractError(path, lines[""], "", "a mapping at the top level (version, seed, entries, ...)",
                            f"a {_kind(data)}")
    problems = _Problems(path, lines)
    model = problems.validate(Contract, data, [])
    specs = _family_specs(problems, data)
    problems.raise_all()
    problems.readable = _readable(problems, model)
    loaded = _resolve(problems, model, specs, lines, import_kernels)
    problems.raise_all()
    loaded.raw = data
    return loaded


def _read(path: str) -> str:
    """The file's text, or a ContractError saying why not."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ContractError(path, None, "", "no such file; pass --contract FILE") from None
    except IsADirectoryError:
        raise ContractError(path, None, "", "a file", "a directory") from None
    except OSError as error:
        raise ContractError(path, None, "", f"a readable file ({error.strerror})") from None
    if len(raw) > MAX_BYTES:
        raise ContractError(path, None, "", f"a contract of at most {MAX_BYTES // 2**20} MiB (checked before "
                            f"parsing)", f"{os.path.getsize(path):,} bytes: is it the contract? Register fewer "
                            "entries or cases in it") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ContractError(path, raw[:error.start].count(b"\n") + 1, "", "UTF-8 text",
                            f"byte {raw[error.start]:#04x}") from None


def _readable(problems: _Problems, model: Contract) -> list[Path]:
    """The folders the contract's kernel files may lie in: its own and each existing one `include:` names; its
    `folders` must lie in them too."""
    base = Path(problems.file).resolve().parent
    for i, folder in enumerate(model.include):
        if not resolve_source(base, folder).is_dir():
            problems.add(["include", i], f"an existing folder, relative to {base}", _show(folder))
    readable = readable_folders(problems.file, [f for f in model.include if resolve_source(base, f).is_dir()])
    named = [(["folders", "kernels", i], f) for i, f in enumerate(model.folders.kernels)]
    for parts, folder in named + [(["folders", "records"], model.folders.records)]:
        if not inside(resolve_source(base, folder), readable):
            problems.add(parts, _outside("folder", base), _show(folder))
    return readable


def _outside(kind: str, base: Path) -> str:
    """What a path outside the readable folders should be, and how to make it so."""
    how = "add its folder to `include:`" if kind == "file" else "add it to `include:`"
    return (f"a {kind} under the contract's folder {base} or a folder that `include:` names; move the {kind} there, "
            f"or {how}")


def _family_specs(problems: _Problems, data: dict) -> dict[int, tuple[type[Family], BaseModel]]:
    """Each entry's family class and validated Spec, by entry index (entries with errors left out); each family
    named is looked up once."""
    specs: dict[int, tuple[type[Family], BaseModel]] = {}
    found: dict[str, tuple[type[Family] | None, str | None]] = {}
    entries = data.get("entries")
    for i, raw in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(raw, dict) or not isinstance(raw.get("family"), str):
            continue  # the generic schema reports it
        if raw["family"] not in found:
            found[raw["family"]] = _family(raw["family"])
        cls, why = found[raw["family"]]
        if cls is None:
            problems.add(["entries", i, "family"], why, _show(raw["family"]))
            continue
        fields = {key: value for key, value in raw.items() if key not in Entry.model_fields}
        spec = problems.validate(cls.Spec, fields, ["entries", i], list(Entry.model_fields))
        if spec is not None:
            specs[i] = (cls, spec)
    return specs


def _family(name: str) -> tuple[type[Family] | None, str | None]:
    """A `family:` value's class, or None and what was expected instead."""
    try:
        cls = family_class(name)
    except Exception as error:  # a family module that exists but is broken: say where, not a traceback
        return None, f"a family that imports; importing it raised {one_line(error)}"
    if cls is None:
        return None, f"a known family (one of: {', '.join(family_names())}) or package.module:Class"
    return cls, None


def _resolve(problems: _Problems, model: Contract, specs: dict, lines: dict[str, int],
             import_kernels: bool) -> LoadedContract:
    """Family instances, kernels, gate lists and the cross-checks between entries, controls and findings."""
    entries: list[LoadedEntry] = []
    first_line: dict[str, int | None] = {}
    gates_of: dict[str, list[int]] = {}
    memory = physical_memory()
    for i, entry in enumerate(model.entries):
        base = ["entries", i]
        cls, spec = specs[i]
        if entry.name in first_line:
            problems.add(base + ["name"], f"each entry name once (first at line {first_line[entry.name]})",
                         _show(entry.name))
            continue
        first_line[entry.name] = line_of(lines, base)
        try:
            family = cls(entry.name, spec, model.seed)
        except ValueError as error:
            problems.add(base, str(error))
            continue
        kernel = _kernel(problems, model, entry.kernel, family, base, import_kernels)
        if kernel is None:
            gates_of[entry.name] = list(NUMBERS)  # so its controls are not reported as well
            continue
        compiled = kernel.compiled
        missing = [n for n in family.exports_needed() if compiled is None or n not in compiled.exports]
        if missing:
            problems.add(base + ["kernel"], f"a compiled kernel whose `exports` give {', '.join(missing)}: the entry's "
                         f"declared arithmetic reads them from its kernel")
        unnamed = [role for role in _launched_roles(family) if compiled is not None and role not in compiled.symbols]
        if unnamed:
            problems.add(base + ["kernel"], f"`symbols` that name {', '.join(unnamed)}: family {entry.family} launches "
                         f"them for this entry")
        unlaunchable = [n for n in family.launch_exports() if compiled is not None and n not in compiled.exports]
        if unlaunchable:
            problems.add(base + ["kernel"], f"`exports` that give {', '.join(unlaunchable)}: family {entry.family} "
                         f"launches its compiled kernels by them")
        gates = gates_of[entry.name] = _gates(problems, entry, cls, kernel, base)
        _check_cases(problems, family, kernel, base, memory)
        if entry.coverage is not None and kernel.cuda is None:
            problems.add(base + ["coverage"], "a coverage floor only on a CUDA kernel (its lines are counted)")
        if entry.mutation is not None and kernel.compiled is None:
            problems.add(base + ["mutation"], "argued mutants only on a CUDA or Triton kernel (`kcontract mutate` "
                         "mutates it)")
        for j, why in argued_line_problems(Path(problems.file).resolve().parent, kernel.compiled, entry.mutation):
            problems.add(base + ["mutation", "equivalent", j, "line"], why)
        entries.append(LoadedEntry(entry.name, entry.family, family, kernel, gates, entry.timeout,
                                   line_of(lines, base), i, entry.coverage, entry.mutation))
    controls = _controls(problems, model, entries, gates_of, lines, import_kernels)
    _check_findings(problems, model, gates_of)
    return LoadedContract(problems.file, model, entries, controls, list(model.known_findings), dict(lines))


def _launched_roles(family: Family) -> list[str]:
    """The symbol roles the family launches for its entry (a malformed shape is gate 5's to report)."""
    return [shape.role for shape in family.launch_shapes() or [] if isinstance(getattr(shape, "role", None), str)]


def _kernel(problems: _Problems, model: Contract, ref: KernelRef | str, family: Family, base: Parts,
            import_kernels: bool) -> KernelRef | None:
    """The entry's or control's kernel: a named one looked up, placeholders filled, Python kernels checked."""
    parts = base + ["kernel"]
    defined = parts  # where the reference is written: the entry, or the named kernel under `kernels`
    if isinstance(ref, str):
        if ref not in model.kernels:
            problems.add(parts, f"a kernel named under `kernels` (one of: {_few(model.kernels)})", _show(ref))
            return None
        defined, ref = ["kernels", ref], model.kernels[ref]
    given = [kind for kind in ("python", "cuda", "triton") if getattr(ref, kind) is not None]
    if len(given) != 1:
        problems.add(parts, "exactly one of `python`, `cuda` or `triton`", " and ".join(given) or "none")
        return None
    if ref.compiled is not None:
        kind = ref.compiled_field
        if ref.device:
            problems.add(parts + ["device"], "`device` only with a `python` kernel", "true")
        folder = Path(problems.file).resolve().parent
        if not _readable_files(problems, ref.compiled, defined + [kind], folder):
            return None
        if not resolve_source(folder, ref.compiled.source).is_file():
            problems.add(defined + [kind, "source"], f"an existing {_LANGUAGE[kind]} source file, relative to "
                         f"{folder}", _show(ref.compiled.source))
            return None
        malformed = shape_problem(ref.triton) if kind == "triton" else None
        if malformed:
            problems.add(defined + [kind] + malformed[0], malformed[1])
            return None
        compiled, why = fill_symbols(ref.compiled, family.template_args())
        if not why and kind == "triton":
            why = next(filter(None, map(symbol_problem, compiled.symbols.values())), None)
            compiled = with_default_launch(compiled) if not why else compiled
        if why:
            problems.add(parts + [kind, "symbols"], why)
            return None
        compiled, why = fill_launch(compiled, family.template_args(), model.targets)
        if why:
            problems.add(parts + [kind, "launch"], why)
            return None
        return ref.model_copy(update={kind: only_launched(compiled, _launched_roles(family))})
    if import_kernels:
        key = (ref.python, tuple(family.kernel_abi()))
        if key not in problems.python_checked:
            problems.python_checked[key] = python_kernel_problem(ref, key[1], problems.import_roots)
        why = problems.python_checked[key]
        if why:
            problems.add(parts + ["python"], why, _show(ref.python))
            return None
    return ref


def _readable_files(problems: _Problems, cuda: CompiledKernel, parts: Parts, folder: Path) -> bool:
    """Whether the compiled kernel's source and the header folders and files its options name lie in the readable
    folders (else each outside is a mistake, and none of them is opened)."""
    named = [(parts + ["source"], "file", cuda.source)]
    named += [(parts + ["options", i], kind, value) for i, kind, value in option_paths(cuda.options)]
    outside = [(at, kind, value) for at, kind, value in named
               if not inside(resolve_source(folder, value), problems.readable)]
    for at, kind, value in outside:
        problems.add(at, _outside(kind, folder), _show(value))
    return not outside


def _gates(problems: _Problems, entry: Entry, cls: type[Family], kernel: KernelRef, base: Parts) -> list[int]:
    """The entry's gates: its own list checked against what family and kernel feed, or all of those."""
    fed = fed_by(cls.suites, compiled=kernel.compiled is not None)
    if entry.gates is None:
        return fed
    if not entry.gates:
        problems.add(base + ["gates"], "at least one gate (leave `gates` out to run every gate the family feeds)",
                     "[]")
    for j, number in enumerate(entry.gates):
        if gate(number).kind is Kind.RECORDS and kernel.compiled is None:
            problems.add(base + ["gates", j], f"gate {number} only with a compiled (CUDA or Triton) kernel (it "
                         "checks compiled launch records)", _show(number))
        elif number not in fed:
            problems.add(base + ["gates", j], f"a gate family {cls.name} feeds ({_few(fed)})", _show(number))
        elif number in entry.gates[:j]:
            problems.add(base + ["gates", j], "each gate once", _show(number))
    return sorted({number for number in entry.gates if number in fed})


def _check_cases(problems: _Problems, family: Family, kernel: KernelRef, base: Parts, memory: int) -> None:
    """Every case is an instance the CUDA kernel supports and fits in this machine's memory."""
    names = family.cases(Suite.REALISTIC) if Suite.REALISTIC in type(family).suites else []
    args = family.template_args()
    if kernel.compiled is not None:
        for name in names or [None]:
            traits = {**args, **(family.case_traits(name) if name is not None else {})}
            why = instance_problem(kernel.compiled, traits)
            if why:
                at = _case_parts(family, name)
                problems.add(base + at, why)
                break
    host_buffers = kernel.compiled is None and not (kernel.python and kernel.device)
    for name in names:
        need = family.case_bytes(name) + (family.case_buffer_bytes(name) if host_buffers else 0)
        if memory and need > memory:
            problems.add(base + _case_parts(family, name),
                         f"a case that fits in memory: its largest call needs at least {size_text(need)} "
                         f"({need:,} bytes) and this machine has {size_text(memory)}; shorten the cache or "
                         f"use fewer rows")


def _case_parts(family: Family, name: str | None) -> Parts:
    """The field path of a case within its entry, where the family's spec lists cases."""
    cases = getattr(family.spec, "cases", None)
    if name is None or cases is None:
        return []
    for k, case in enumerate(cases):
        if getattr(case, "name", None) == name:
            return ["cases", k]
    return []


def _controls(problems: _Problems, model: Contract, entries: list[LoadedEntry], gates_of: dict[str, list[int]],
              lines: dict[str, int], import_kernels: bool) -> list[LoadedControl]:
    """Controls: unique names, an existing entry, a gate that entry runs, a kernel that resolves."""
    first_line: dict[str, int | None] = {}
    by_name = {e.name: e for e in entries}
    loaded: list[LoadedControl] = []
    for k, control in enumerate(model.controls):
        base = ["controls", k]
        if control.name in first_line:
            problems.add(base + ["name"], f"each control name once (first at line {first_line[control.name]})",
                         _show(control.name))
            continue
        first_line[control.name] = line_of(lines, base)
        if control.entry not in gates_of:
            problems.add(base + ["entry"], f"an entry name (one of: {_few(gates_of)})", _show(control.entry))
            continue
        if control.gate not in gates_of[control.entry]:
            problems.add(base + ["gate"], f"a gate entry {control.entry} runs ({_few(gates_of[control.entry])})",
                         _show(control.gate))
            continue
        entry = by_name.get(control.entry)
        if entry is None:
            continue  # its entry's own error is reported
        if control.kernel is None and control.patch is None:
            problems.add(base, "a `patch` of the entry's kernel, or a `kernel` of the control's own", "neither")
            continue
        kernel = entry.kernel if control.kernel is None else _kernel(problems, model, control.kernel, entry.family,
                                                                     base, import_kernels)
        if kernel is None:
            continue
        if control.patch is not None:
            kernel = _patched(problems, kernel, control.patch, base + ["patch"])
            if kernel is None:
                continue
        if kernel.cuda is not None and not kernel.cuda.launch and entry.kernel.cuda is not None:
            # a control stands in for its entry's kernel: it is launched the same way unless it says otherwise
            kernel = kernel.model_copy(update={"cuda": kernel.cuda.model_copy(update={"launch": entry.kernel.cuda.launch})})
        if gate(control.gate).kind is Kind.RECORDS and kernel.compiled is None:
            problems.add(base + ["gate"], f"a gate-{control.gate} control with a compiled kernel (it checks compiled "
                         "launch records)", _show(control.gate))
            continue
        if control.sanitize and kernel.cuda is None:
            problems.add(base + ["sanitize"], "a sanitizer expectation on a CUDA control", _show(control.sanitize))
            continue
        loaded.append(LoadedControl(control.name, control.entry, kernel, control.gate, control.fault,
                                    control.timeout, line_of(lines, base), k, control.sanitize, control.trials))
    return loaded


def _patched(problems: _Problems, kernel: KernelRef, patch: str, parts: Parts) -> KernelRef | None:
    """The kernel with `patch` applied to its CUDA or Triton source: the patch must exist and apply exactly."""
    if kernel.compiled is None:
        problems.add(parts, "a patch only of a CUDA or Triton kernel", _show(patch))
        return None
    folder = Path(problems.file).resolve().parent
    path = resolve_source(folder, patch)
    source = resolve_source(folder, kernel.compiled.source)
    if not inside(path, problems.readable):
        problems.add(parts, _outside("file", folder), _show(patch))
        return None
    try:
        apply(source.read_text(), path.read_text(), source.name)
    except OSError as error:
        problems.add(parts, f"an existing patch file, relative to {folder} ({error.strerror})", _show(patch))
        return None
    except PatchError as error:
        problems.add(parts, f"a patch that applies exactly: {patch}:{error.line}: {error.message}")
        return None
    kind = kernel.compiled_field
    return kernel.model_copy(update={kind: kernel.compiled.model_copy(update={"patch": patch})})


def _check_findings(problems: _Problems, model: Contract, gates_of: dict[str, list[int]]) -> None:
    """Known findings: an existing entry, a gate it runs, each entry x gate once."""
    seen: set[tuple[str, int]] = set()
    for k, finding in enumerate(model.known_findings):
        base = ["known_findings", k]
        if finding.entry not in gates_of:
            problems.add(base + ["entry"], f"an entry name (one of: {_few(gates_of)})", _show(finding.entry))
        elif finding.gate not in gates_of[finding.entry]:
            problems.add(base + ["gate"], f"a gate entry {finding.entry} runs ({_few(gates_of[finding.entry])})",
                         _show(finding.gate))
        elif (finding.entry, finding.gate) in seen:
            problems.add(base, "each entry x gate once", f"{finding.entry!r} gate {finding.gate} twice")
        seen.add((finding.entry, finding.gate))


class _Problems:
    """Collects located errors, raising them all, the first by line carrying the others; and holds what the checks
    of one load share."""

    def __init__(self, file: str, lines: dict[str, int]):
        self.file, self.lines = file, lines
        self.found: list[ContractError] = []
        self.python_checked: dict[tuple, str | None] = {}  # (module:function, ABI) -> why it cannot be called
        self.readable: list[Path] = []  # the folders its kernel files may lie in (paths.readable_folders)

    @functools.cached_property
    def import_roots(self) -> list[Path]:
        """The folders the contract's Python modules import from, named where one is not found."""
        return import_roots(self.file)

    def add(self, parts: Parts, expected: str, given: str | None = None) -> None:
        """Record one mistake at a field path."""
        path = ""
        for part in parts:
            path = join(path, part)
        error = ContractError(self.file, line_of(self.lines, parts), path, expected, given)
        if all(e.message != error.message for e in self.found):  # a named kernel used twice is one mistake
            self.found.append(error)

    def raise_all(self) -> None:
        """Raise the recorded mistakes, if any: the earliest by line, carrying the others in line order."""
        if not self.found:
            return
        ordered = sorted(self.found, key=lambda e: (e.line is None, e.line or 0))
        first = ordered[0]
        first.others = ordered[1:]
        raise first

    def validate(self, schema: type[BaseModel], data: dict, prefix: Parts,
                 outer_fields: list[str] | None = None) -> BaseModel | None:
        """Validate YAML data as strict JSON input (lists fill tuples, ints fill floats, no text for numbers)."""
        slips = list(_bool_slips(schema, data, []))
        for parts, values in slips:
            self.add(prefix + parts, _one_of(values), "True" if _get(data, parts) else "False")
        try:
            model = schema.model_validate_json(json.dumps(data), strict=True)
        except ValidationError as error:
            described = [_describe(e, schema, data, outer_fields) for e in error.errors()]
            for parts, expected, given in _merge_unions(described):
                self.add(prefix + parts, expected, given)
            return None
        return None if slips else model


def _describe(error: dict, schema: type[BaseModel], data: Any, outer_fields: list[str] | None):
    """(parts, expected, given, tagged) for one pydantic error."""
    kind, ctx, value, loc = error["type"], error.get("ctx") or {}, error.get("input"), error["loc"]
    if kind == "missing":  # the last loc item is the absent key, never a union tag
        parts, tagged = _parts(loc[:-1], data)
        return parts + [loc[-1]], "required field missing", None, tagged
    parts, tagged = _parts(loc, data)
    given = _show(value)
    if kind == "extra_forbidden":
        names = list(dict.fromkeys(((outer_fields or []) if len(parts) == 1 else []) + _fields_at(schema, parts[:-1])))
        return parts, f"unknown key; expected one of: {', '.join(names)}", _show(parts[-1]), tagged
    if kind in _WORDS:
        return parts, _WORDS[kind], given, tagged
    if kind == "literal_error":
        values = [v for a in _members_at(schema, parts) if get_origin(a) is Literal for v in get_args(a)]
        return parts, _one_of(values) if values else f"one of {ctx.get('expected')}", given, tagged
    if kind in _CONSTRAINTS:
        key, op = _CONSTRAINTS[kind]
        noun = "an integer" if int in _members_at(schema, parts) else "a number"
        return parts, f"{noun} {op} {_num(ctx.get(key))}", given, tagged
    if kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        n = ctx.get("min_length" if kind == "too_short" else "max_length")
        count = _items(len(value)) if hasattr(value, "__len__") else given
        return parts, f"{bound} {_items(n)}", count, tagged
    if kind == "string_too_short":
        n = ctx.get("min_length")
        return parts, "a non-empty string" if n == 1 else f"a string of at least {n} characters", given, tagged
    if kind == "string_pattern_mismatch":
        return parts, _PATTERNS.get(ctx.get("pattern"), f"text matching {ctx.get('pattern')}"), given, tagged
    if kind in ("value_error", "assertion_error"):
        text = re.sub(r"^(Value|Assertion) error, ", "", error["msg"])
        expected, sep, stated = text.rpartition(", given: ")
        if not sep:
            return parts, text, given, tagged
        return parts + _item_with(_get(data, parts), stated), expected, stated, tagged
    return parts, re.sub(r"^Input should be ", "", error["msg"]), given, tagged


def _merge_unions(described: list) -> list[tuple[Parts, str, str | None]]:
    """One mistake per path for union members that each failed: `an integer or a string`."""
    merged: list[list] = []
    for parts, expected, given, tagged in described:
        if tagged and merged and merged[-1][3] and merged[-1][0] == parts:
            if expected not in merged[-1][1]:
                merged[-1][1] = f"{merged[-1][1]} or {expected}"
            continue
        merged.append([parts, expected, given, tagged])
    return [(parts, expected, given) for parts, expected, given, _ in merged]


def _parts(loc: tuple, data: Any) -> tuple[Parts, bool]:
    """A pydantic loc as a field path into `data`, dropping union member tags; True if any were dropped."""
    parts: Parts = []
    tagged = False
    current = data
    for part in loc:
        if isinstance(part, int):
            parts.append(part)
            current = current[part] if isinstance(current, list) and 0 <= part < len(current) else None
        elif isinstance(current, dict) and part in current:
            parts.append(part)
            current = current[part]
        elif part in _TYPE_TAGS or not re.fullmatch(r"[a-z_][a-z0-9_]*", part) or (
                isinstance(current, dict) and part in current.values()):
            tagged = True  # a union member's name, or a discriminated union's tag value
        else:
            parts.append(part)
            current = None
    return parts, tagged


def _get(data: Any, parts: Parts) -> Any:
    """The value at a field path, or None."""
    for part in parts:
        if isinstance(part, int) and isinstance(data, list) and 0 <= part < len(data):
            data = data[part]
        elif isinstance(part, str) and isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return None
    return data


def _item_with(value: Any, shown: str, parts: Parts | None = None) -> Parts:
    """The path (below `value`) of the first list item whose repr is `shown`, or []."""
    parts = parts or []
    if isinstance(value, dict):
        children = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    else:
        return []
    for key, child in children:
        if isinstance(key, int) and not isinstance(child, (dict, list)) and repr(child) == shown:
            return parts + [key]
        found = _item_with(child, shown, parts + [key])
        if found:
            return found
    return []


def _members(annotation: Any) -> list[Any]:
    """The alternatives of an annotation, Annotated and None stripped."""
    if get_origin(annotation) is Annotated:
        return _members(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for arg in get_args(annotation) if arg is not type(None) for m in _members(arg)]
    return [annotation]


def _members_at(schema: type[BaseModel], parts: Parts) -> list[Any]:
    """Every annotation alternative the schema has at a field path."""
    current = [schema]
    for part in parts:
        following = []
        for annotation in (m for a in current for m in _members(a)):
            origin, args = get_origin(annotation), get_args(annotation)
            if isinstance(part, int) and origin in (list, set, frozenset) and args:
                following.append(args[0])
            elif isinstance(part, int) and origin is tuple and args:
                following.append(args[0] if args[-1] is Ellipsis or part >= len(args) else args[part])
            elif isinstance(part, str) and origin is dict and len(args) == 2:
                following.append(args[1])
            elif isinstance(part, str) and isinstance(annotation, type) and issubclass(annotation, BaseModel) \
                    and part in annotation.model_fields:
                following.append(annotation.model_fields[part].annotation)
        current = following
    return [m for a in current for m in _members(a)]


def _fields_at(schema: type[BaseModel], parts: Parts) -> list[str]:
    """The field names a mapping at this path may have."""
    names: list[str] = []
    for annotation in _members_at(schema, parts):
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names += [k for k in annotation.model_fields if k not in names]
    return names


def _bool_slips(schema: type[BaseModel], data: Any, parts: Parts):
    """(path, literal values) for each true/false where only integer literals fit (pydantic takes True as 1)."""
    if isinstance(data, bool):
        members = _members_at(schema, parts)
        if members and all(get_origin(m) is Literal for m in members):
            values = [v for m in members for v in get_args(m)]
            if not any(isinstance(v, bool) for v in values):
                yield parts, values
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _bool_slips(schema, value, parts + [key])
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _bool_slips(schema, value, parts + [index])


def _one_of(values: list) -> str:
    """`one of 1, 2, 3` (or the single allowed value)."""
    return repr(values[0]) if len(values) == 1 else "one of " + ", ".join(repr(v) for v in values)


def _items(n: int) -> str:
    """`1 item`, `3 items`."""
    return f"{n} item{'' if n == 1 else 's'}"


def _few(names) -> str:
    """Up to six names, comma-separated."""
    names = [str(n) for n in names]
    return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "") if names else "none declared"


def _num(value: Any) -> str:
    """A bound as written: 2^63 rather than its digits."""
    if isinstance(value, int) and value >= 2**16 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


_LANGUAGE = {"cuda": "CUDA", "triton": "Triton"}


def _show(value: Any) -> str:
    """A value's repr, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    """A YAML value's kind in words."""
    return {list: "list", str: "string", int: "number", float: "number", bool: "true/false"}.get(type(value),
                                                                                            type(value).__name__)
