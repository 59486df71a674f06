"""A CuPy stand-in for following a CUDA job on a machine without a GPU: it names a device's SM, and loading a cubin
raises `Loaded`, so a job's route ends where its kernel would start to run (or, `loads`, gives a module whose
functions are records of what was set on them)."""

from __future__ import annotations

import sys
import types


class Loaded(Exception):
    """A cubin reached CuPy: the path it would have loaded."""


def raw_module(path: str | None = None, **options):
    """CuPy's RawModule: the cubin is where the route ends."""
    raise Loaded(path)


class Function:
    """A loaded function: its mangled name and the attributes set on it."""

    def __init__(self, name: str):
        self.name = name


class Module:
    """A loaded cubin: its path and the functions asked of it; it holds no globals (no coverage probes)."""

    def __init__(self, path: str | None = None, **options):
        self.path, self.functions = path, []

    def get_function(self, name: str) -> Function:
        self.functions.append(Function(name))
        return self.functions[-1]

    def get_global(self, name: str):
        raise RuntimeError(f"no global {name}")


class _Device:
    def __init__(self, compute_capability: str):
        self.compute_capability = compute_capability


def install(monkeypatch, compute_capability: str = "90", loads: bool = False) -> types.ModuleType:
    """A fake `cupy` in sys.modules for the test, and kcontract told that CuPy runs on a GPU."""
    import kcontract.launch

    fake = types.ModuleType("cupy")
    fake.RawModule = Module if loads else raw_module
    fake.cuda = types.SimpleNamespace(Device=lambda *index: _Device(compute_capability),
                                      driver=types.SimpleNamespace(CUDADriverError=RuntimeError),
                                      runtime=types.SimpleNamespace(CUDARuntimeError=RuntimeError),
                                      Stream=lambda non_blocking=False: types.SimpleNamespace(synchronize=lambda: None))
    fake.get_default_memory_pool = lambda: types.SimpleNamespace(set_limit=lambda size: None)
    fake.ndarray, fake.uint32 = object, "uint32"  # reading a module's globals (it has none)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: None)
    return fake


def memory_hooks(monkeypatch, used: int) -> list:
    """A fake `cupy` whose pool has `used` bytes in use and whose memory-hook base class registers hooks in the
    returned list while they are entered, as CuPy's `MemoryHook` does (its methods are called by the test)."""
    entered: list = []

    class MemoryHook:
        name = "MemoryHook"

        def __enter__(self):
            entered.append(self)
            return self

        def __exit__(self, *_):
            entered.remove(self)

    fake = types.ModuleType("cupy")
    fake.get_default_memory_pool = lambda: types.SimpleNamespace(used_bytes=lambda: used)
    hook = types.ModuleType("cupy.cuda.memory_hook")
    hook.MemoryHook = MemoryHook
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupy.cuda", types.ModuleType("cupy.cuda"))
    monkeypatch.setitem(sys.modules, "cupy.cuda.memory_hook", hook)
    return entered
