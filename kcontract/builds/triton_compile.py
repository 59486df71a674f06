"""One Triton kernel compiled ahead of time for one SM, in the process that asks (a spawned compile worker): the
source written beside its own folder and imported, its jit function's signature read from its annotations, and
`triton.compile` run with Triton's own ptxas, whose report is kept."""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kcontract.builds.artifact import TRITON_SCRATCH
from kcontract.contract.imports import import_text
from kcontract.contract.triton_symbols import Symbol, SymbolError, parse_symbol
from kcontract.usercode import UserCodeExit, user_code


@dataclass(frozen=True)
class Compiled:
    """A compile's cubin, the symbol's lowered name, ptxas's report, the PTX and Triton's metadata."""

    cubin: bytes
    lowered: dict[str, str]
    log: str
    ptx: str
    metadata: dict


@dataclass(frozen=True)
class Failed:
    """Why a Triton kernel does not compile (its log)."""

    log: str


def compile_job(job: tuple) -> tuple[str, Compiled | Failed]:
    """(key, source bytes, source path, expression, SM number): the key and the compile or its failure."""
    key, source, path, expression, sm = job
    try:
        with user_code(f"{Path(path).name} while compiling `{expression}`"):
            return key, _compile(source, Path(path), expression, sm)
    except (SymbolError, UserCodeExit) as error:
        return key, Failed(str(error))
    except Exception as error:  # the user's module or Triton raised: its message first, then all it said
        said = [line for line in str(error).splitlines() if line.strip()]
        return key, Failed(f"{type(error).__name__} error: {said[-1] if said else ''}\n{error}")


def _compile(source: bytes, path: Path, expression: str, sm: int) -> Compiled:
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    symbol = parse_symbol(expression)
    with tempfile.TemporaryDirectory(prefix="kcontract-triton-") as scratch:
        module = import_text(source, path, Path(scratch), f"kcontract_triton_{path.stem}")
        function = getattr(module, symbol.function, None)
        if not isinstance(function, triton.runtime.jit.JITFunction):
            raise SymbolError(f"{path.name} has no @triton.jit function `{symbol.function}`")
        signature, constexprs = _signature(function, symbol)
        log = io.StringIO()
        with knobs.cache.scope(), knobs.compilation.scope(), knobs.nvidia.scope():
            knobs.cache.dir = str(Path(scratch) / "cache")  # compile afresh, so ptxas runs and reports
            knobs.compilation.always_compile = True
            knobs.nvidia.dump_ptxas_log = True
            with contextlib.redirect_stdout(log):
                kernel = triton.compile(ASTSource(function, signature, constexprs, _attributes(function, symbol, signature)),
                                        target=GPUTarget("cuda", sm, 32), options=dict(symbol.options))
    meta = kernel.metadata
    params = [p.name for p in function.params if not p.is_constexpr]
    entry = re.search(r"\.entry\s+\w+\s*\(([^)]*)\)", kernel.asm["ptx"])
    if entry is None or entry.group(1).count(".param") != len(params) + TRITON_SCRATCH:
        raise SymbolError(f"`{expression}` compiles to a kernel whose parameters are not its own {len(params)} and "
                          f"Triton's {TRITON_SCRATCH} scratch pointers: this Triton's launch ABI is not one kcontract "
                          f"knows")
    if meta.global_scratch_size or getattr(meta, "profile_scratch_size", 0):
        raise SymbolError(f"`{expression}` needs Triton's global scratch memory, which kcontract does not allocate")
    facts = {"name": meta.name, "shared": int(meta.shared), "num_warps": int(meta.num_warps),
             "num_stages": int(meta.num_stages), "num_ctas": int(meta.num_ctas),
             "params": params,
             "constexprs": {k: v for k, v in constexprs.items()}, "triton": triton.__version__}
    return Compiled(kernel.asm["cubin"], {expression: meta.name}, log.getvalue(), kernel.asm["ptx"], facts)


def _attributes(function, symbol: Symbol, signature: dict[str, str]) -> dict[tuple[int, ...], list[list]]:
    """Triton's per-parameter attributes for the symbol's declared divisibility: `tt.divisibility` at each named
    parameter's index, as Triton's launcher gives the arguments it finds divisible by 16."""
    params = list(function.params)
    index = {p.name: i for i, p in enumerate(params)}
    attributes = {}
    for name, divisor in symbol.divisibility.items():
        if name not in index:
            raise SymbolError(f"`{symbol.function}` has no parameter {name} to declare divisible by {divisor} "
                              f"(parameters: {', '.join(p.name for p in params)})")
        if params[index[name]].is_constexpr:
            raise SymbolError(f"`{symbol.function}`: {name} is a constexpr, whose value is known: drop it from "
                              f"divisibility")
        if not signature[name].startswith(("*", "i", "u")):
            raise SymbolError(f"`{symbol.function}`: {name} is {signature[name]}; divisibility is declared of pointers "
                              f"and integers")
        attributes[(index[name],)] = [["tt.divisibility", divisor]]
    return attributes


def _signature(function, symbol: Symbol) -> tuple[dict[str, str], dict[str, object]]:
    """Each parameter's Triton type from its annotation (constexprs: "constexpr"), and the constexpr values (the
    symbol's, else the parameter's default)."""
    signature, constexprs = {}, {}
    names = {p.name for p in function.params}
    unknown = sorted(set(symbol.constexprs) - names)
    if unknown:
        raise SymbolError(f"`{symbol.function}` has no parameter {unknown[0]} (parameters: {', '.join(sorted(names))})")
    for param in function.params:
        if param.is_constexpr:
            if param.name in symbol.constexprs:
                constexprs[param.name] = symbol.constexprs[param.name]
            elif param.has_default:
                constexprs[param.name] = param.default
            else:
                raise SymbolError(f"`{symbol.function}`: give constexpr {param.name} a value in the symbol, such as "
                                  f"`{symbol.function}({param.name}=...)`")
            signature[param.name] = "constexpr"
        elif param.name in symbol.constexprs:
            raise SymbolError(f"`{symbol.function}`: {param.name} is not a constexpr (annotate it `tl.constexpr`)")
        elif not param.annotation_type:
            raise SymbolError(f"`{symbol.function}`: annotate parameter {param.name} with its Triton type, such as "
                              f"`{param.name}: \"*bf16\"` or `\"i32\"`")
        else:
            signature[param.name] = param.annotation
    return signature, constexprs
