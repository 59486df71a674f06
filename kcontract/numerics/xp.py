"""One code path for numpy and CuPy: which array module computes references, and helpers both lack alike.

References run on the GPU where CuPy and a GPU are present (KCONTRACT_REFERENCES=numpy|cupy|auto picks;
auto is the default), on numpy otherwise. float64 sums on the GPU add in another order than numpy's;
the range derivation's float64 slack covers either order.
"""

from __future__ import annotations

import functools
import os

import numpy as np

ENV = "KCONTRACT_REFERENCES"


def array_module(*arrays):
    """cupy if any argument is a CuPy array, else numpy."""
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            import cupy

            return cupy
    return np


@functools.lru_cache(maxsize=1)
def reference_module():
    """The module references compute with: CuPy on a usable GPU (unless KCONTRACT_REFERENCES=numpy), else numpy."""
    choice = os.environ.get(ENV, "auto").strip().lower()
    if choice == "numpy":
        return np
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        cupy.zeros(1).sum()
        return cupy
    except Exception as error:  # no CuPy, no GPU or no driver
        if choice == "cupy":
            raise RuntimeError(f"{ENV}=cupy, and CuPy cannot use a GPU here: {error}") from None
        return np


def reference_device() -> str:
    """'gpu' or 'cpu': where references compute in this process."""
    return "cpu" if reference_module() is np else "gpu"


def to_device(host, xp):
    """A host array as an array of xp; to CuPy by a plain copy, with no pinned staging buffer left behind in
    CuPy's pinned pool (`cupy.asarray` stages through it, and the pool keeps host memory the size of every input)."""
    if xp is np or array_module(host) is not np:
        return xp.asarray(host)
    host = np.ascontiguousarray(host)
    device = xp.empty(host.shape, dtype=host.dtype)
    device.set(host)
    return device


def to_host(a) -> np.ndarray:
    """A numpy array of a (a copy from the GPU where it lives there)."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def segment_reduce(x, starts, op: str, padded: bool | None = None):
    """Reduce x [G, n] over the segments of its last axis beginning at `starts` (host ints): 'sum' or 'max', [G, nseg].

    numpy uses ufunc.reduceat; CuPy (or padded=True) gathers the segments into a padded [G, nseg, longest]
    block filled with the operation's identity and reduces its last axis.
    """
    xp = array_module(x)
    starts = np.asarray(starts, dtype=np.int64)
    if padded is None:
        padded = xp is not np
    if not padded:
        return (np.add if op == "sum" else np.maximum).reduceat(x, starts, axis=1)
    n = x.shape[1]
    ends = np.append(starts[1:], n)
    longest = int((ends - starts).max())
    idx = xp.asarray(starts)[:, None] + xp.arange(longest)[None, :]
    inside = idx < xp.asarray(ends)[:, None]
    block = x[:, xp.minimum(idx, n - 1)]
    identity = 0.0 if op == "sum" else -xp.inf
    block = xp.where(inside[None], block, identity)
    return block.sum(axis=2) if op == "sum" else block.max(axis=2)
