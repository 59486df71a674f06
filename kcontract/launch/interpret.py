"""The interpreter launcher: a Triton kernel run on the CPU through Triton's interpreter (`kcontract run
--interpret`), a double of its GPU run whose arithmetic is numpy's, not the GPU's.

The kernel is the contract's source with its patch (a control's fault), imported here; each launch step of a
problem runs its role's jit function over the step's grid, one program after another, with the symbol's
constexprs. Buffers travel as torch CPU tensors (Triton's interpreter reads and writes through them), bf16 and
fp16 bit patterns viewed in their format. Every output is poisoned before the call.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

from kcontract.contract.imports import import_text
from kcontract.contract.patches import PatchError, read_patched
from kcontract.contract.paths import resolve_source
from kcontract.contract.triton_symbols import parse_symbol
from kcontract.errors import EnvironmentProblem, KContractError
from kcontract.launch.base import KernelFailure
from kcontract.launch.python import poisoned
from kcontract.numerics import from_bits, rn_bits
from kcontract.problem import Problem, built
from kcontract.usercode import UserCodeExit, user_code

TORCH_VIEWS = {"bf16": "bfloat16", "fp16": "float16"}  # pointer types whose buffers travel as uint16 bits


def interpreter_ready() -> None:
    """Raise EnvironmentProblem (exit 3) unless Triton's interpreter and torch import here."""
    for name, why in (("triton", "pip install 'kcontract[triton]'"), ("torch", "pip install torch (its CPU build "
                                                                              "will do)")):
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise EnvironmentProblem(f"--interpret runs Triton kernels through Triton's interpreter, which needs "
                                     f"{name} ({error}): {why}") from None


def interpreting_triton():
    """Triton imported in interpreter mode (TRITON_INTERPRET=1 before its first import, so its own jit functions,
    `tl.sum` among them, interpret too); EnvironmentProblem where this process imported it otherwise first."""
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(triton.language.standard.sum, InterpretedFunction):
        raise EnvironmentProblem("--interpret: Triton was imported in this process before its interpreter could be "
                                 "asked for; run the tasks in workers (unset KCONTRACT_IN_PROCESS) or set "
                                 "TRITON_INTERPRET=1")
    return triton


@contextlib.contextmanager
def faithful():
    """Triton's interpreter made to do what a compiled kernel does where it is known not to: a runtime scalar's
    `__index__` works on every numpy (releases before triton-lang/triton 9171 call int() on a one-element array,
    which numpy 2.4 refuses); an fp32 value cast to bf16 rounds to nearest even, as `cvt.rn.bf16.f32` does (the
    interpreter cuts the low bits off); and tl.dot of bf16 tiles multiplies their values (the interpreter
    multiplies their bit patterns), each tile's products summed exactly and rounded to fp32 once, then added to the
    accumulator in fp32."""
    from triton.runtime import interpreter

    builder, original_patch = interpreter.InterpreterBuilder, interpreter._patch_lang_tensor
    originals = {name: getattr(builder, name) for name in ("cast_impl", "create_fp_to_fp", "create_dot")}

    def patch_tensor(tensor, scope):
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    def to_bf16(src, dst_type, rounding_mode=None) -> bool:
        """Whether a cast is fp32 to bf16 rounding to nearest even."""
        import triton.language as tl

        nearest = rounding_mode is None or rounding_mode == interpreter._ir.ROUNDING_MODE.RTNE
        return nearest and src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16

    def rounded(src, dst_type):
        bits = rn_bits(np.asarray(src.data, dtype=np.float32).astype(np.float64), "bf16").astype(np.uint16)
        return interpreter.TensorHandle(bits, dst_type.scalar)

    def cast_impl(self, src, dst_type):
        return rounded(src, dst_type) if to_bf16(src, dst_type) else originals["cast_impl"](self, src, dst_type)

    def fp_to_fp(self, src, dst_type, rounding_mode):
        if to_bf16(src, dst_type, rounding_mode):
            return rounded(src, dst_type)
        return originals["create_fp_to_fp"](self, src, dst_type, rounding_mode)

    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        import triton.language as tl

        if tl.bfloat16 not in (a.dtype.scalar, b.dtype.scalar):
            return originals["create_dot"](self, a, b, d, input_precision, max_num_imprecise_acc)
        values = [from_bits(np.asarray(x.data), "bf16") if x.dtype.scalar == tl.bfloat16
                  else np.asarray(x.data, dtype=np.float64) for x in (a, b)]
        tile = np.matmul(*values).astype(np.float32)
        return interpreter.TensorHandle(tile + np.asarray(d.data, dtype=np.float32), d.dtype.scalar)

    interpreter._patch_lang_tensor = patch_tensor
    builder.cast_impl, builder.create_fp_to_fp, builder.create_dot = cast_impl, fp_to_fp, dot
    try:
        yield
    finally:
        interpreter._patch_lang_tensor = original_patch
        for name, method in originals.items():
            setattr(builder, name, method)


class InterpretLauncher:
    """Runs problems through Triton's interpreter: each launch step's role, its grid, its arguments in order."""

    def __init__(self, loaded, kernel):
        interpreting_triton()
        from triton.runtime.interpreter import InterpretedFunction

        triton_kernel = kernel.triton
        base = Path(loaded.path).resolve().parent
        self.label = triton_kernel.source + (f" with {triton_kernel.patch}" if triton_kernel.patch else "")
        self.version = sys.modules["triton"].__version__
        path = resolve_source(base, triton_kernel.source)
        try:
            source = read_patched(path, resolve_source(base, triton_kernel.patch) if triton_kernel.patch else None)
        except OSError as error:
            raise KContractError(f"cannot read {triton_kernel.source}: {error.strerror}") from None
        except PatchError as error:
            raise KContractError(f"{triton_kernel.patch}:{error.line}: {error.message}") from None
        try:
            with user_code(f"importing {self.label}"), tempfile.TemporaryDirectory(prefix="kcontract-") as scratch:
                module = import_text(source, path, Path(scratch), f"kcontract_interpret_{path.stem}")
        except UserCodeExit as error:
            raise KContractError(str(error)) from None
        except Exception as error:  # the user's module raised on import
            raise KContractError(f"{self.label} does not import: {type(error).__name__}: {error}") from None
        self.roles = {}
        for role, expression in triton_kernel.symbols.items():
            symbol = parse_symbol(expression)
            function = getattr(module, symbol.function, None)
            if not isinstance(function, InterpretedFunction):
                raise KContractError(f"{self.label} has no @triton.jit function `{symbol.function}`")
            types = {name: str(kind) for name, kind in function.fn.__annotations__.items()}
            self.roles[role] = (function, types, symbol.constexprs)

    def provenance(self) -> dict:
        """What ran: the source and Triton's interpreter (no SM, no cubin)."""
        return {"source": self.label, "interpreter": f"triton {self.version}"}

    def run(self, problem: Problem) -> dict[str, np.ndarray]:
        import torch

        arrays = {name: np.array(built(value)) for name, value in problem.inputs.items()}
        outputs = {name: np.asarray(poisoned(name, spec)) for name, spec in problem.outputs.items()}
        values = {**arrays, **outputs, **problem.scalars}
        self._check_launches(problem, values)
        try:
            for step in problem.launches:
                function, types, constexprs = self.roles[step.role]
                args = [self._argument(torch, values[name], types.get(name, "")) for name in step.args]
                with user_code(f"kernel {self.label} in call {problem.label}"), faithful(), np.errstate(all="ignore"):
                    function[step.grid](*args, **constexprs)  # numpy's warnings of inf and NaN: a GPU says none
        except UserCodeExit as error:
            raise KernelFailure(str(error)) from None
        except Exception as error:  # the kernel's own exception, in one line
            said = str(error).strip().splitlines()
            raise KernelFailure(f"kernel {self.label} raised {type(error).__name__} in Triton's interpreter in call "
                                f"{problem.label}: {said[-1] if said else ''}", traceback.format_exc()) from None
        return problem.fetched(outputs)

    def _check_launches(self, problem: Problem, values: dict) -> None:
        """KernelFailure where the call launches nothing, or a step names a role or an argument it lacks."""
        if not problem.launches:
            raise KernelFailure(f"call {problem.label}: its family gave no launch for {self.label}")
        for step in problem.launches:
            missing = [name for name in step.args if name not in values]
            if step.role not in self.roles or missing:
                what = f"role {step.role}" if step.role not in self.roles else ", ".join(missing)
                raise KernelFailure(f"call {problem.label}: launch {step.role} names {what}, which "
                                    f"{'the kernel' if step.role not in self.roles else 'the problem'} does not hold")

    @staticmethod
    def _argument(torch, value, annotation: str):
        """A buffer as a torch CPU tensor sharing its memory (bit patterns viewed in their pointer's format); a
        scalar as the Python number of its C value."""
        if isinstance(value, np.ndarray):
            tensor = torch.from_numpy(value)
            view = TORCH_VIEWS.get(annotation.lstrip("*"))
            return tensor.view(getattr(torch, view)) if view and value.dtype == np.uint16 else tensor
        return value.item() if isinstance(value, np.generic) else value

    def run_concurrent(self, problems: list[Problem]) -> list[dict[str, np.ndarray]]:
        """One after another: the interpreter's programs run in this thread."""
        return [self.run(problem) for problem in problems]

    def close(self) -> None:
        """Nothing is held between tasks."""
