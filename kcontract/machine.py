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


def free_gpu_memory() -> int:
    """Free bytes on the current GPU, or 0 where CuPy sees none."""
    try:
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    except Exception:  # no CuPy, no driver or no device
        return 0
