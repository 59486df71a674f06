"""A Triton kernel's symbol, `fn(BLOCK=1024, num_warps=4, num_stages=1, divisibility="x:16")`: the jit function,
its constexprs, its launch options and the divisibility its launches' arguments hold; and the launch a Triton
kernel gets by default (its warps' threads, its shared bytes)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kcontract.contract.model import LaunchDecl, TritonKernel

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")  # keywords that are options, not constexprs
DIVISIBILITY = "divisibility"  # the keyword naming what divides the launches' arguments (Triton's tt.divisibility)
MAX_DIVISOR = 1 << 20  # a bound on a declared divisor, far past any alignment Triton's analysis uses
SHARED_EXPORT = "shared_bytes"  # the export a Triton kernel's launch reads its dynamic shared memory from


class SymbolError(ValueError):
    """A Triton symbol that does not read as `fn(NAME=value, ...)`."""


@dataclass(frozen=True)
class Symbol:
    """A Triton symbol: the jit function, its constexpr values and its launch options."""

    function: str
    constexprs: dict[str, object]
    options: dict[str, int]
    divisibility: dict[str, int] = field(default_factory=dict)  # parameter -> a power of two dividing it (bytes
    # of a pointer's address, an integer's value) in every launch

    @property
    def warps(self) -> int:
        """Warps per program (Triton's default 4)."""
        return int(self.options.get("num_warps", 4))


def parse_symbol(expression: str) -> Symbol:
    """`rms_norm_rows(BLOCK=1024, num_warps=4)` as a Symbol; SymbolError where it is not a name, or a call of a name
    with literal keyword arguments."""
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Name):
        return Symbol(tree.id, {}, {})
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name) or tree.args:
        raise SymbolError(f"`{expression}` is not a call of a jit function by keyword, such as "
                          f"`my_kernel(BLOCK=1024, num_warps=4)`")
    constexprs, options, divisibility = {}, {}, {}
    for keyword in tree.keywords:
        try:
            value = ast.literal_eval(keyword.value)
        except ValueError:
            raise SymbolError(f"`{expression}`: {keyword.arg} is not a literal") from None
        if keyword.arg == DIVISIBILITY:
            divisibility = _divisibility(expression, value)
        elif keyword.arg in LAUNCH_OPTIONS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SymbolError(f"`{expression}`: {keyword.arg} is a positive integer, given {value!r}")
            options[keyword.arg] = value
        else:
            constexprs[keyword.arg] = value
    return Symbol(tree.func.id, constexprs, options, divisibility)


def _divisibility(expression: str, value: object) -> dict[str, int]:
    """`"x:16 n:8"` (as Triton's compile tool writes `*bf16:16`) as {"x": 16, "n": 8}: parameters to powers of two."""
    pairs = value.replace(",", " ").split() if isinstance(value, str) else []
    if not pairs:
        raise SymbolError(f"`{expression}`: {DIVISIBILITY} names parameters and powers of two dividing them, such as "
                          f"{DIVISIBILITY}=\"x:16 n:8\"")
    found = {}
    for pair in pairs:
        name, _, text = pair.partition(":")
        if not name.isidentifier() or not text.isdigit():
            raise SymbolError(f"`{expression}`: {DIVISIBILITY} pairs read NAME:POWER, such as x:16, given {pair!r}")
        if name in found:
            raise SymbolError(f"`{expression}`: {DIVISIBILITY} names {name} twice")
        divisor = int(text)
        if divisor < 2 or divisor > MAX_DIVISOR or divisor & (divisor - 1):
            raise SymbolError(f"`{expression}`: {DIVISIBILITY} of {name} is a power of two from 2 to {MAX_DIVISOR}, "
                              f"given {divisor}")
        found[name] = divisor
    return found


def shape_problem(kernel: TritonKernel) -> tuple[list, str] | None:
    """Where and why a Triton kernel is malformed (a field path under the kernel, and the expectation), or None."""
    if not kernel.source.endswith(".py"):
        return ["source"], "a Python source file (.py) holding the @triton.jit function"
    if kernel.options:
        return ["options"], "no `options` (Triton's launch options go in the symbol: `fn(num_warps=8)`)"
    if len(kernel.symbols) != 1:
        return ["symbols"], "one symbol: a Triton kernel is one jit function, launched in one role"
    return None


def symbol_problem(expression: str) -> str | None:
    """Why a filled-in Triton symbol does not parse, or None."""
    try:
        parse_symbol(expression)
    except SymbolError as error:
        return str(error)
    return None


def with_default_launch(kernel: TritonKernel) -> TritonKernel:
    """The kernel with each role launched as Triton launches it, unless its `launch` says otherwise: 32 threads per
    warp of its symbol and the dynamic shared memory its compile reports (the `shared_bytes` export)."""
    exports = {SHARED_EXPORT: "shared", **kernel.exports}
    launch = dict(kernel.launch)
    for role, expression in kernel.symbols.items():
        if role not in launch:
            launch[role] = LaunchDecl(threads=32 * parse_symbol(expression).warps,
                                      dynamic_smem="{" + SHARED_EXPORT + "}")
    return kernel.model_copy(update={"exports": exports, "launch": launch})
