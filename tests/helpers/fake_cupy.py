"""A CuPy stand-in for following a CUDA job on a machine without a GPU: it names a device's SM, and loading a cubin
raises `Loaded`, so a job's route ends where its kernel would start to run."""

from __future__ import annotations

import sys
import types


class Loaded(Exception):
    """A cubin reached CuPy: the path it would have loaded."""


def raw_module(path: str | None = None, **options):
    """CuPy's RawModule: the cubin is where the route ends."""
    raise Loaded(path)


class _Device:
    def __init__(self, compute_capability: str):
        self.compute_capability = compute_capability


def install(monkeypatch, compute_capability: str = "90") -> types.ModuleType:
    """A fake `cupy` in sys.modules for the test, and kcontract told that CuPy runs on a GPU."""
    import kcontract.launch

    fake = types.ModuleType("cupy")
    fake.RawModule = raw_module
    fake.cuda = types.SimpleNamespace(Device=lambda *index: _Device(compute_capability),
                                      driver=types.SimpleNamespace(CUDADriverError=RuntimeError),
                                      runtime=types.SimpleNamespace(CUDARuntimeError=RuntimeError))
    fake.get_default_memory_pool = lambda: types.SimpleNamespace(set_limit=lambda size: None)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: None)
    return fake
