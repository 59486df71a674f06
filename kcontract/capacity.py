"""Facts about the machine a run happens on: memory, and sizes in words."""

from __future__ import annotations

import os


def physical_memory() -> int:
    """Bytes of physical memory, or 0 where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def size_text(n: int) -> str:
    """`3.2 GiB`, `512 MiB`, `96 KiB` or `100 bytes`."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def limit_gpu_pool(limit: int) -> None:
    """Cap CuPy's memory pool at `limit` bytes (0: no cap) where CuPy is installed: past the cap the pool frees the
    blocks it caches and, if that is not enough, raises OutOfMemoryError."""
    try:
        import cupy
    except ImportError:  # no CuPy: nothing on a GPU to cap
        return
    cupy.get_default_memory_pool().set_limit(size=max(0, int(limit)))


def out_of_memory(error: BaseException) -> bool:
    """Whether an error is a GPU allocation that failed (CuPy's pool, or the CUDA runtime's)."""
    text = f"{type(error).__name__}: {error}".lower()
    return "outofmemoryerror" in text or "out of memory" in text or "erroralloc" in text or \
        "cudaerrormemoryallocation" in text


def free_gpu_memory() -> int:
    """Free bytes on the current GPU, or 0 where CuPy sees none."""
    try:
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    except Exception:  # no CuPy, no driver or no device
        return 0
