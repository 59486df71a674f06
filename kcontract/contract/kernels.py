"""Kernel references: named kernels looked up, symbol placeholders filled, instances and Python kernels checked.

Each check returns a problem in words (expected, given) or None; the loader locates it in the file.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import string
import traceback

from kcontract.contract.model import CompiledKernel, KernelRef
from kcontract.sms import limits_for
from kcontract.usercode import UserCodeExit, user_code


def fill_symbols(kernel: CompiledKernel, args: dict[str, object]) -> tuple[CompiledKernel | None, str | None]:
    """The kernel with `{name}` placeholders in its symbols and exports replaced by the family's template
    arguments."""
    filled: dict[str, dict[str, str]] = {"symbols": {}, "exports": {}}
    for field, what in (("symbols", "symbol"), ("exports", "export")):
        for role, expression in getattr(kernel, field).items():
            unknown = [n for n in _names(expression) if n not in args]
            if unknown:
                given = ", ".join(sorted(args)) or "none"
                return None, (f"{what} `{role}` names {{{unknown[0]}}}, which its family does not give "
                              f"(template arguments: {given})")
            filled[field][role] = expression.format_map(args)
    return kernel.model_copy(update=filled), None


def only_launched(kernel: CompiledKernel, roles: list[str]) -> CompiledKernel:
    """The kernel with only the symbols its family launches for the entry (a named kernel shared by entries lists
    the union; the others would be compiled, recorded and mutated for nothing). Unchanged where the family names
    no roles or a role has no symbol, which the loader reports."""
    if not roles or not set(roles) <= set(kernel.symbols):
        return kernel
    return kernel.model_copy(update={"symbols": {r: e for r, e in kernel.symbols.items() if r in roles},
                                     "launch": {r: s for r, s in kernel.launch.items() if r in roles}})


SMEM_OPTIN = "smem_optin"  # in a dynamic_smem expression: the target SM's opt-in shared memory per block, bytes
LAUNCH_FIELDS = (("threads", 1, 1024), ("dynamic_smem", 0, 1 << 20))  # each launch field and its bounds


def fill_launch(kernel: CompiledKernel, args: dict[str, object], targets: list[str]
                ) -> tuple[CompiledKernel | None, str | None]:
    """The kernel with every `launch` expression evaluated over the template arguments, checked for range; a
    dynamic_smem that names {smem_optin} (or gives bytes per SM) becomes {sm: bytes} where the targets differ."""
    shapes = {}
    for role, shape in kernel.launch.items():
        values = {}
        for field, low, high in LAUNCH_FIELDS:
            given = getattr(shape, field)
            if isinstance(given, str) and set(_names(given)) & set(kernel.exports):
                value, why = _deferred(given, args, set(kernel.exports))
            else:
                value, why = _launch_value(given, field, args, targets, (low, high))
            if why:
                return None, f"launch `{role}` {field}{why}"
            values[field] = value
        shapes[role] = shape.model_copy(update=values)
    return kernel.model_copy(update={"launch": shapes}), None


def _launch_value(given: int | str | dict, field: str, args: dict[str, object], targets: list[str],
                  bounds: tuple[int, int]) -> tuple[int | dict[str, int], str | None]:
    """One launch field: an integer, or {sm: integer} where it differs per target SM; or why not (`: ...`)."""
    per_sm = isinstance(given, dict) or (field == "dynamic_smem" and SMEM_OPTIN in _names(given))
    found = {}
    for sm in targets if per_sm else [""]:
        where = f" on {sm}" if sm else ""
        if isinstance(given, dict):  # bytes per SM, as a loaded contract writes them back
            value = given.get(sm, given.get(sm.rstrip("af")))
            if value is None:
                return 0, f": bytes for every target SM, none given for {sm}"
        else:
            value, why = _integer(given, {**args, SMEM_OPTIN: limits_for(sm).smem_per_block_optin} if sm else args)
            if why:
                return 0, f"{where}: {why}"
        if not bounds[0] <= value <= bounds[1]:
            return 0, f"{where} between {bounds[0]} and {bounds[1]}, given: {value}"
        found[sm] = value
    return (found if len(set(found.values())) > 1 else next(iter(found.values()))), None


def _deferred(given: str, args: dict[str, object], exported: set[str]) -> tuple[str, str | None]:
    """A launch expression that names the kernel's exports: its template arguments filled in now, its exports read
    from each SM's cubin where the kernel is built (`launch_on`)."""
    unknown = [n for n in _names(given) if n not in args and n not in exported and n != SMEM_OPTIN]
    if unknown:
        return "", (f": names {{{unknown[0]}}}, which neither the family's template arguments nor the kernel's "
                    f"exports give (exports: {', '.join(sorted(exported))})")
    return re.sub(r"\{(\w+)\}", lambda m: str(args[m.group(1)]) if m.group(1) in args else m.group(0), given), None


def launch_on(given: int | str | dict, field: str, sm: str, exports: dict[str, int]) -> tuple[int, str | None]:
    """One launch field's value on `sm` for a kernel built there, whose exports are given; or why not."""
    bounds = dict((name, (low, high)) for name, low, high in LAUNCH_FIELDS)[field]
    if isinstance(given, dict):
        value = given.get(sm, given.get(sm.rstrip("af")))
        return (value, None) if value is not None else (0, f": bytes for every target SM, none given for {sm}")
    value, why = _integer(given, {**exports, SMEM_OPTIN: limits_for(sm).smem_per_block_optin})
    if why:
        return 0, f" on {sm}: {why}"
    if not bounds[0] <= value <= bounds[1]:
        return 0, f" on {sm} between {bounds[0]} and {bounds[1]}, given: {value}"
    return value, None


def _names(value: int | str) -> list[str]:
    """The {placeholders} of an expression."""
    return [] if isinstance(value, int) else [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]


_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}
_CALLS = {"min": min, "max": max}
GRAMMAR = "an integer or an expression of + - * // %, min(...) and max(...) over integers and {placeholders}"


def _integer(value: int | str, args: dict[str, object]) -> tuple[int, str | None]:
    """An integer, or an expression (GRAMMAR) over integers and {placeholders}; (value, why not)."""
    if isinstance(value, int):
        return value, None
    unknown = [n for n in _names(value) if n not in args]
    if unknown:
        return 0, f"names {{{unknown[0]}}}, which the family does not give (it gives: {', '.join(sorted(args))})"
    text = value.format_map(args)

    def evaluate(node) -> int:
        if isinstance(node, ast.Expression):
            return evaluate(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](evaluate(node.left), evaluate(node.right))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS
                and len(node.args) >= 2 and not node.keywords):
            return _CALLS[node.func.id](evaluate(a) for a in node.args)
        raise ValueError(text)

    try:
        return evaluate(ast.parse(text, mode="eval")), None
    except (SyntaxError, ValueError, ZeroDivisionError):
        return 0, f"{GRAMMAR}, given: {value!r}"


def instance_problem(kernel: CompiledKernel, traits: dict[str, object]) -> str | None:
    """Why `traits` (template arguments and case facts) match none of the kernel's instances, or None."""
    if not kernel.instances:
        return None
    for instance in kernel.instances:
        unknown = [key for key in instance if key not in traits]
        if unknown:
            return (f"an instance key the family gives ({', '.join(sorted(traits))}); "
                    f"{kernel.source}'s instances name `{unknown[0]}`")
        if all(traits[key] in values for key, values in instance.items()):
            return None
    shown = "; ".join(", ".join(f"{k} {_values(v)}" for k, v in inst.items()) for inst in kernel.instances)
    wanted = ", ".join(f"{k} {traits[k]}" for k in sorted({k for inst in kernel.instances for k in inst}))
    return f"{wanted} is not an instance of {kernel.source} (its instances: {shown}); it is refused, not run untested"


def _values(values: list) -> str:
    """`128, 256 or 512`, or a run of integers as `1-16`."""
    if len(values) > 3 and all(isinstance(v, int) for v in values) and values == list(range(values[0],
                                                                                            values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def python_kernel_problem(kernel: KernelRef, abi: tuple[str, ...], roots: list | tuple = ()) -> str | None:
    """Why a Python kernel cannot be called with the family's ABI arguments, or None; `roots` are the folders the
    contract's modules resolve from, named where the module is not found."""
    module_name, _, attr = kernel.python.partition(":")
    try:
        with user_code(f"importing {module_name}"):
            module = importlib.import_module(module_name)
    except UserCodeExit as error:
        return f"an importable module:function; {error}"
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            where = " and ".join(str(r) for r in roots) or "the contract's folder and its project root"
            return (f"an importable module:function; no module named {error.name!r} in {where} or on the Python "
                    f"path (put the module there, or add its folder to PYTHONPATH)")
        return f"an importable module:function; importing {module_name} failed: {one_line(error)}"
    except Exception as error:  # a broken user module: show where it broke, not a traceback
        return f"an importable module:function; importing {module_name} raised {one_line(error)}"
    if not hasattr(module, attr):
        return f"a function of {module_name}; it has no attribute {attr!r}"
    fn = getattr(module, attr)
    if not callable(fn):
        return f"a callable; {module_name}.{attr} is a {type(fn).__name__}"
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # a builtin or extension callable: it is tried at run time
    try:
        signature.bind(**{name: None for name in abi})
    except TypeError as error:
        return (f"a function taking the ABI's arguments by keyword ({', '.join(abi)}); "
                f"{module_name}.{attr}{signature} cannot: {error}")
    return None


def one_line(error: BaseException) -> str:
    """`SyntaxError: invalid syntax (kernel.py, line 3)` with the innermost frame's file:line where known."""
    text = f"{type(error).__name__}: {error}"
    frames = traceback.extract_tb(error.__traceback__)
    if frames and not isinstance(error, SyntaxError):
        text += f" at {frames[-1].filename}:{frames[-1].lineno}"
    return text
