"""Kernel references: named kernels looked up, symbol placeholders filled, instances and Python kernels checked.

Each check returns a problem in words (expected, given) or None; the loader locates it in the file.
"""

from __future__ import annotations

import importlib
import inspect
import string
import traceback

from kcontract.contract.model import CudaKernel, KernelRef


def fill_symbols(kernel: CudaKernel, args: dict[str, object]) -> tuple[CudaKernel | None, str | None]:
    """The kernel with `{name}` placeholders in its symbols replaced by the family's template arguments."""
    filled = {}
    for role, expression in kernel.symbols.items():
        names = [field for _, field, _, _ in string.Formatter().parse(expression) if field is not None]
        unknown = [n for n in names if n not in args]
        if unknown:
            given = ", ".join(sorted(args)) or "none"
            return None, (f"symbol `{role}` names {{{unknown[0]}}}, which its family does not give "
                          f"(template arguments: {given})")
        filled[role] = expression.format_map(args)
    return kernel.model_copy(update={"symbols": filled}), None


def instance_problem(kernel: CudaKernel, traits: dict[str, object]) -> str | None:
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


def python_kernel_problem(kernel: KernelRef, abi: tuple[str, ...]) -> str | None:
    """Why a Python kernel cannot be called with the family's ABI arguments, or None."""
    module_name, _, attr = kernel.python.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            return (f"an importable module:function; no module named {error.name!r} (modules resolve from the "
                    f"contract's folder and its project root)")
        return f"an importable module:function; importing {module_name} failed: {_one_line(error)}"
    except Exception as error:  # a broken user module: show where it broke, not a traceback
        return f"an importable module:function; importing {module_name} raised {_one_line(error)}"
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


def _one_line(error: BaseException) -> str:
    """`SyntaxError: invalid syntax (decode.py, line 3)` with the innermost frame's file:line where known."""
    text = f"{type(error).__name__}: {error}"
    frames = traceback.extract_tb(error.__traceback__)
    if frames and not isinstance(error, SyntaxError):
        text += f" at {frames[-1].filename}:{frames[-1].lineno}"
    return text
