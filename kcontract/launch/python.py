"""The `python` launcher: any kernel reachable from Python, called with the family's ABI buffers by keyword."""

from __future__ import annotations

import functools
import importlib
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from kcontract.launch.base import KernelFailure
from kcontract.capacity import out_of_memory
from kcontract.numerics import poison_bits
from kcontract.problem import Assembled, OutputSpec, Problem, built
from kcontract.usercode import UserCodeExit, user_code

BIT_FORMATS = ("bf16", "fp16")  # formats that travel as uint16 bit patterns
POOL_BYTES = 1 << 30  # filled host buffers a launcher keeps between calls


def resolve(target: str) -> Callable:
    """Import `module:function` (the loader has checked that it imports and takes the ABI)."""
    module_name, _, attr = target.partition(":")
    with user_code(f"importing {module_name}"):
        return getattr(importlib.import_module(module_name), attr)


def describe(spec: OutputSpec) -> str:
    """`uint16 bf16 bits of shape (4, 8, 128)` or `float32 of shape (4, 8)`."""
    kind = f"uint16 {spec.fmt} bits" if spec.fmt in BIT_FORMATS else "float32"
    return f"{kind} of shape {tuple(spec.shape)}"


class BitsBuffer(np.ndarray):
    """A uint16 output buffer of bit patterns that refuses float values instead of casting them."""

    spec_name: str = ""
    spec: OutputSpec | None = None

    def __array_finalize__(self, obj) -> None:
        self.spec_name = getattr(obj, "spec_name", "")
        self.spec = getattr(obj, "spec", None)

    def __setitem__(self, key, value) -> None:
        given = np.asarray(value)
        if given.dtype.kind in "fc" and self.spec is not None:
            raise OutputMismatch(f"{self.spec_name}: expected {describe(self.spec)}, given {given.dtype} "
                                 f"{tuple(given.shape)}")
        super().__setitem__(key, value)


class OutputMismatch(Exception):
    """A kernel wrote an output of the wrong kind or shape."""


def poisoned(name: str, spec: OutputSpec) -> np.ndarray:
    """An output buffer full of NaN in its format, so unwritten elements fail."""
    if spec.fmt in BIT_FORMATS:
        buf = np.full(spec.shape, poison_bits(spec.fmt), dtype=np.uint16).view(BitsBuffer)
        buf.spec_name, buf.spec = name, spec
        return buf
    return np.full(spec.shape, np.nan, dtype=np.float32)


def _returned(value, outputs: dict[str, np.ndarray], problem: Problem) -> None:
    """Copy outputs a kernel returned ({name: array}) into the buffers, checking kind and shape."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise OutputMismatch(f"returned a {type(value).__name__}: write the outputs in place or return "
                             f"{{name: array}} for {', '.join(problem.outputs)}")
    for name, array in value.items():
        if name not in problem.outputs:
            raise OutputMismatch(f"returned {name!r}, which is no output (outputs: {', '.join(problem.outputs)})")
        spec, array = problem.outputs[name], np.asarray(value[name])
        want = np.uint16 if spec.fmt in BIT_FORMATS else np.float32
        if array.dtype != want or array.shape != tuple(spec.shape):
            raise OutputMismatch(f"{name}: expected {describe(spec)}, given {array.dtype} {tuple(array.shape)}")
        np.copyto(outputs[name], array)


class FilledBuffers:
    """Host memory holding an assembled input's fill, kept between calls: a call writes its blocks over a buffer
    at least its size and puts the fill back after, so a task fills (and faults in) its caches once, not per call."""

    def __init__(self, keep_bytes: int = POOL_BYTES):
        self.free: dict[tuple, list[np.ndarray]] = {}  # flat buffers by (dtype, fill), all holding the fill
        self.keep_bytes = keep_bytes
        self.lock = threading.Lock()

    def take(self, value: Assembled) -> np.ndarray:
        """A buffer of value's shape holding the fill, with value's blocks written."""
        size = int(np.prod(value.shape))
        with self.lock:
            stack = self.free.get(_key(value), [])
            fits = [i for i, flat in enumerate(stack) if flat.size >= size]
            flat = stack.pop(min(fits, key=lambda i: stack[i].size)) if fits else None
        if flat is None:
            flat = np.full(size, value.fill, value.dtype)
        return value.write_blocks(flat[:size].reshape(value.shape))

    def give(self, value: Assembled, out: np.ndarray) -> None:
        """Clear value's blocks from out and keep its memory for later calls, the largest buffers first."""
        value.clear_blocks(out)
        with self.lock:
            stack = self.free.setdefault(_key(value), [])
            stack.append(out.base)  # the flat buffer take() cut out a view of
            stack.sort(key=lambda flat: -flat.size)
            while stack and sum(flat.nbytes for kept in self.free.values() for flat in kept) > self.keep_bytes:
                stack.pop()


@functools.cache
def worker_buffers() -> FilledBuffers:
    """The filled buffers every Python launcher of this process shares: a worker's tasks fill a cache's memory once."""
    return FilledBuffers()


def _key(value: Assembled) -> tuple:
    return np.dtype(value.dtype).str, int(value.fill)


class PythonLauncher:
    """Calls fn(**inputs, **outputs, **scalars); the function writes the outputs in place (or returns them)."""

    def __init__(self, target: str):
        self.target = target
        self.fn = resolve(target)
        self.buffers = worker_buffers()

    def run(self, problem: Problem) -> dict[str, np.ndarray]:
        assembled = {name: self.buffers.take(value) for name, value in problem.inputs.items()
                     if isinstance(value, Assembled)}
        try:
            return self._call(problem, assembled)
        finally:
            for name, out in assembled.items():
                self.buffers.give(problem.inputs[name], out)

    def _call(self, problem: Problem, assembled: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        inputs = {}
        for name, array in problem.inputs.items():
            view = (assembled[name] if name in assembled else built(array)).view()
            view.flags.writeable = False  # a kernel that writes its inputs fails loudly
            inputs[name] = view
        outputs = {name: poisoned(name, spec) for name, spec in problem.outputs.items()}
        try:
            with user_code(f"kernel {self.target} in call {problem.label}"):
                _returned(self.fn(**inputs, **outputs, **problem.scalars), outputs, problem)
        except UserCodeExit as error:
            raise KernelFailure(str(error)) from None
        except OutputMismatch as error:
            raise KernelFailure(f"kernel {self.target} in call {problem.label}: {error}") from None
        except Exception as error:  # the kernel's own exception, reported in one line
            raise KernelFailure(f"kernel {self.target} raised {type(error).__name__}: {error} in call "
                                f"{problem.label}", traceback.format_exc(), out_of_memory=out_of_memory(error)) from None
        return {name: np.asarray(buf) for name, buf in outputs.items()}

    def run_concurrent(self, problems: list[Problem]) -> list[dict[str, np.ndarray]]:
        with ThreadPoolExecutor(max_workers=len(problems)) as pool:
            return list(pool.map(self.run, problems))
