"""The cubin launcher (CUDA and Triton kernels): the exact cubins of the compile cache, loaded with CuPy, launched
as the problem says.

The bytes that run are the bytes gate 5 and sass-diff describe: the job's build (kcontract.builds.artifact) names
the cubin `Builds` found or compiled for this device's SM, its symbols' lowered names and the exports its launch
reads, and the toolchain that built it, which `provenance()` reports; nothing here compiles. Every output is
poisoned before every launch; a fault of the GPU context ends the worker so the next task starts clean.
"""

from __future__ import annotations

import hashlib
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import numpy as np

from kcontract.builds.artifact import TRITON_SCRATCH, KernelBuild, ModuleBuild
from kcontract.errors import EnvironmentProblem
from kcontract.launch.base import KernelFailure
from kcontract.launch.divisors import broken_divisors
from kcontract.capacity import out_of_memory
from kcontract.numerics import poison_bits
from kcontract.problem import KernelLaunch, Problem, built
from kcontract.profiling import note_gpu_bytes
from kcontract.records.attributes import compare_loaded_attributes, record_row
from kcontract.records.records import records_root
from kcontract.records.shapes import launch_shapes
from kcontract.records.toolchains import has_own_records
from kcontract.usercode import UserCodeExit, user_code

OPT_IN = 48 * 1024  # dynamic shared memory above this needs the function's opt-in attribute
STICKY = ("illegal", "misaligned", "launch failed", "exception", "trap", "hardware", "unspecified launch")


def device_sm(cupy) -> str:
    """`sm_90` for the current device."""
    return f"sm_{cupy.cuda.Device().compute_capability}"


def target_for(sm: str, targets: list[str]) -> str:
    """The contract's target that runs on a device of `sm`: its arch-specific form (`sm_90a`) where the targets
    name that, else `sm` itself."""
    specific = [t for t in targets if t != sm and t.rstrip("af") == sm]
    return specific[0] if specific else sm


def poisoned(cupy, spec):
    """A device buffer full of NaN in the output's format."""
    if spec.fmt in ("bf16", "fp16"):
        return cupy.full(spec.shape, int(poison_bits(spec.fmt)), dtype=cupy.uint16)
    return cupy.full(spec.shape, cupy.nan, dtype=cupy.float32)


def load_cubin(cupy, module: ModuleBuild, symbols: dict[str, str], label: str):
    """A module's cubin loaded with CuPy, and its function per role (`symbols`: role -> name expression); a driver
    that refuses it is an environment problem."""
    try:
        loaded = cupy.RawModule(path=module.path)
        return loaded, {role: loaded.get_function(module.lowered[expr]) for role, expr in symbols.items()}
    except cupy.cuda.driver.CUDADriverError as error:
        raise EnvironmentProblem(f"{label}: the {module.sm} cubin does not load on this GPU ({error}); check the "
                                 f"driver against the toolchain") from None


def trailing_args(kind: str) -> tuple:
    """The arguments a kernel kind's ABI takes after the problem's: Triton's scratch pointers, null (its compile
    refuses a kernel that needs scratch memory); none for CUDA."""
    return (np.uint64(0),) * TRITON_SCRATCH if kind == "triton" else ()


class CudaLauncher:
    """Loads an entry's (or control's) compiled kernel, CUDA's or Triton's, for this GPU and runs problems through
    its launch steps."""

    trailing: tuple = ()  # arguments after the problem's, as the kernel kind's ABI takes them
    divisors: Mapping[str, dict] = MappingProxyType({})  # role -> what its compile assumed divides its arguments

    def __init__(self, loaded, entry, kernel, build: KernelBuild | None):
        import cupy

        self.cp = cupy
        compiled = kernel.compiled
        self.label = compiled.source
        self.sm = target_for(device_sm(cupy), list(loaded.targets))
        self.build = build
        self.module_info = self._module()
        self.symbols = tuple(sorted(compiled.symbols.items()))  # role and instance, such as matmul<256, 2, 1>
        self.module, self.functions = load_cubin(cupy, self.module_info, compiled.symbols, self.label)
        self.trailing = trailing_args(build.kind)
        exports, errors = build.only(self.sm)
        shapes, more = launch_shapes(entry.family, sorted(compiled.symbols), entry.name, compiled.launch,
                                     exports)
        errors += more
        if errors:
            raise EnvironmentProblem("; ".join(errors))
        self.smem = {role: shape.smem_on(self.sm) for role, shape in shapes.items()}  # bytes on this GPU
        self.shapes = shapes
        lowered = self.module_info.lowered
        self.divisors = {role: self.module_info.divisors.get(lowered.get(expression, ""), {})
                         for role, expression in compiled.symbols.items()}  # what each role's compile assumed
        for role, smem in self.smem.items():
            if smem > OPT_IN:
                self.functions[role].max_dynamic_shared_size_bytes = smem
        self.streams = (cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True))
        self.maps: dict[tuple, object] = {}  # encoded tensor maps by buffer address, shape and map
        self.reset_probes()

    def _module(self) -> ModuleBuild:
        """The job's module for this GPU's SM, or the environment problem that kept it from being built."""
        build, sm = self.build, self.sm
        if build is None:
            raise EnvironmentProblem(f"{self.label}: its task carries no build; run it through `kcontract run`")
        if sm in build.skipped:
            raise EnvironmentProblem(f"{build.compiler} cannot build for this GPU ({sm}): install a newer NVRTC")
        if sm in build.failures:
            raise EnvironmentProblem(f"{self.label} does not compile for this GPU ({sm}): "
                                     f"{build.failures[sm].strip()[:2000]}")
        if build.on(sm) is None:
            raise EnvironmentProblem(f"{self.label}: its task was built for {', '.join(build.modules) or 'no SM'}, "
                                     f"not for this GPU ({sm}): run it where it was planned")
        return build.on(sm)

    def provenance(self) -> dict:
        """Which cubin ran: source, SM, the toolchain that built it and the cubin's sha256; for a kernel with
        coverage probes (`kcontract coverage`), the probes its launches ran."""
        info = self.module_info
        found = {"source": self.label, "sm": self.sm, "toolchain": self.build.toolchain, "cached": info.cached,
                 "cubin_sha256": hashlib.sha256(Path(info.path).read_bytes()).hexdigest()}
        probes = self.probes_run()
        return found | ({"coverage": probes} if probes is not None else {})

    def reset_probes(self) -> None:
        """Zero the module's coverage counters, where it has any: CuPy loads a cubin once per process and device,
        so they would keep what an earlier task's launches of the same cubin (another entry's stand-in) set."""
        errors = (self.cp.cuda.driver.CUDADriverError, self.cp.cuda.runtime.CUDARuntimeError)
        try:
            count = int(self._counter("kcontract_cov_size"))
        except errors:  # no probes
            return
        for ident in range(count):
            try:
                self.cp.ndarray((1,), self.cp.uint32, memptr=self.module.get_global(f"kcontract_cov_{ident}")).fill(0)
            except errors:  # a probe the compiled code never names
                continue
        self.cp.cuda.Device().synchronize()  # the launches, on their own streams, come after the zeros

    def probes_run(self) -> list[int] | None:
        """The coverage probes set in the module's counters (`kcontract_cov_size` of them), or None where it has
        none."""
        errors = (self.cp.cuda.driver.CUDADriverError, self.cp.cuda.runtime.CUDARuntimeError)
        try:
            count = int(self._counter("kcontract_cov_size"))
        except errors:  # no probes (or a context a fault left unreadable)
            return None
        found = []
        for ident in range(count):
            try:
                if self._counter(f"kcontract_cov_{ident}"):
                    found.append(ident)
            except errors:  # a probe the compiled code never names
                continue
        return found

    def _counter(self, name: str) -> int:
        """A `__device__ unsigned int` of the module, read after every launch so far has finished."""
        cp = self.cp
        for stream in self.streams:
            stream.synchronize()
        return int(cp.ndarray((1,), cp.uint32, memptr=self.module.get_global(name)).get()[0])

    def attribute_mismatches(self, loaded, entry_name: str) -> list[str]:
        """Where the loaded functions' attributes differ from the committed record for this SM and toolchain (none
        to compare where the toolchain has no records: gate 5 reports that as its finding)."""
        found = []
        root, tool = records_root(loaded), self.build.toolchain
        if not has_own_records(root, tool):
            return found
        for role, function in self.functions.items():
            row = record_row(root, tool, entry_name, role, self.sm)
            if row is None:
                found.append(f"{role}: no record for {self.sm} built by {tool}: run `kcontract records --update` "
                             f"with this toolchain")
                continue
            found += [f"{role} on {self.sm}: {m}" for m in compare_loaded_attributes(row, function.attributes)]
        return found

    def run(self, problem: Problem) -> dict[str, np.ndarray]:
        return self.run_concurrent([problem])[0]

    def run_concurrent(self, problems: list[Problem]) -> list[dict[str, np.ndarray]]:
        """Launch each problem's steps on its own stream, wait for all, copy the outputs back."""
        cp = self.cp
        try:
            calls = []
            for problem, stream in zip(problems, self.streams * len(problems)):
                with stream:
                    buffers = {name: built(array, cp) for name, array in problem.inputs.items()}
                    outputs = {name: poisoned(cp, spec) for name, spec in problem.outputs.items()}
                    values = {**buffers, **outputs, **problem.scalars}
                    self.launch_steps(problem.launches, values, stream, problem.label)
                calls.append((stream, problem.fetched(outputs)))
            for stream, _ in calls:
                stream.synchronize()
            note_gpu_bytes(cp.get_default_memory_pool().total_bytes())
            cp.get_default_pinned_memory_pool().free_all_blocks()
            return [{name: out.get() for name, out in outputs.items()} for _, outputs in calls]
        except cp.cuda.memory.OutOfMemoryError as error:
            raise KernelFailure(f"call {problems[0].label} of kernel {self.label} needs more GPU memory than is "
                                f"free ({error}): shorten the case's cache, or run fewer workers (--jobs)",
                                out_of_memory=True) from None
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as error:
            text = str(error)
            fatal = any(word in text.lower() for word in STICKY)
            raise KernelFailure(f"kernel {self.label} failed in call {problems[0].label}: {text}"
                                f"{' (the GPU context is lost: the worker ends)' if fatal else ''}",
                                fatal=fatal) from None

    def launch_steps(self, launches: tuple[KernelLaunch, ...], values: dict, stream, label: str = "") -> None:
        """Launch each step on `stream` with its arguments (device buffers and scalars) in parameter order."""
        for step in launches:
            missing = [name for name in step.args if name not in values and name not in step.tensor_maps]
            if missing:
                raise KernelFailure(f"call {label}: launch {step.role} names {', '.join(missing)}, which the "
                                    f"problem does not hold")
            shape = self.shapes[step.role]
            args = tuple(self.tensor_map(values, step.tensor_maps[name], label) if name in step.tensor_maps
                         else values[name] for name in step.args) + self.trailing
            broken = broken_divisors(args, self.divisors.get(step.role, {}))
            if broken:
                raise KernelFailure(f"call {label}: launch {step.role} of {self.label} breaks its symbol's declared "
                                    f"divisibility ({'; '.join(broken)}): its compile assumed it, so it would read "
                                    f"misaligned; drop or lower the declaration, or change the case")
            self.functions[step.role](step.grid, (shape.threads, 1, 1), args, shared_mem=self.smem[step.role],
                                      stream=stream)

    def tensor_map(self, values: dict, spec, label: str):
        """The encoded tensor map of one of the call's device buffers (encoded once per buffer and map)."""
        from kcontract.launch.tensormap import encode

        if spec.input not in values:
            raise KernelFailure(f"call {label}: a tensor map of {spec.input}, which the problem does not hold")
        array = values[spec.input]
        key = (array.data.ptr, tuple(array.shape), spec)
        if key not in self.maps:
            self.maps[key] = encode(array, spec, label)
        return self.maps[key]

    def close(self) -> None:
        """Release the device memory this launcher's calls used, so workers sharing a GPU do not run out."""
        for stream in self.streams:
            stream.synchronize()
        self.maps.clear()
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()


class DeviceLauncher:
    """A Python kernel on the GPU: called with CuPy arrays (zero-copy for torch, Triton or JAX via DLPack)."""

    def __init__(self, target: str):
        import cupy

        from kcontract.launch.python import resolve

        self.cp, self.target, self.fn = cupy, target, resolve(target)
        self.streams = (cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True))

    def provenance(self) -> dict:
        return {"python": self.target, "sm": device_sm(self.cp)}

    def run(self, problem: Problem) -> dict[str, np.ndarray]:
        return self.run_concurrent([problem])[0]

    def run_concurrent(self, problems: list[Problem]) -> list[dict[str, np.ndarray]]:
        cp = self.cp
        results = []
        for problem, stream in zip(problems, self.streams * len(problems)):
            with stream:
                inputs = {name: built(array, cp) for name, array in problem.inputs.items()}
                outputs = {name: poisoned(cp, spec) for name, spec in problem.outputs.items()}
                try:
                    with user_code(f"kernel {self.target} in call {problem.label}"):
                        self.fn(**inputs, **outputs, **problem.scalars)
                except UserCodeExit as error:
                    raise KernelFailure(str(error)) from None
                except Exception as error:  # the kernel's own exception, in one line
                    raise KernelFailure(f"kernel {self.target} raised {type(error).__name__}: {error} in call "
                                        f"{problem.label}", traceback.format_exc(),
                                        out_of_memory=out_of_memory(error)) from None
            results.append((stream, problem.fetched(outputs)))
        for stream, _ in results:
            stream.synchronize()
        note_gpu_bytes(cp.get_default_memory_pool().total_bytes())
        return [{name: out.get() for name, out in outputs.items()} for _, outputs in results]

    def close(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
