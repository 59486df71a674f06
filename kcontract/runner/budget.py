"""Device memory shared by the workers: a task starts once the bytes its largest case holds fit beside the tasks
already running (one task always runs, however large)."""

from __future__ import annotations

import threading

WORKER_DEVICE_FLOOR = 1 << 30  # device memory a worker holds whatever it runs: its CUDA context and CuPy's pools


class DeviceBudget:
    """`total` bytes handed out to tasks; 0 hands out without limit (no GPU, or no task uses one)."""

    def __init__(self, total: int) -> None:
        self.total, self.in_use = max(0, total), 0
        self.changed = threading.Condition()

    def take(self, need: int, stopped: threading.Event) -> bool:
        """Wait until `need` bytes fit (or nothing else runs); False when the run stopped meanwhile."""
        if not self.total or not need:
            return True
        with self.changed:
            while self.in_use and self.in_use + need > self.total:
                if stopped.is_set():
                    return False
                self.changed.wait(0.2)
            self.in_use += need
        return True

    def give(self, need: int) -> None:
        """Return a finished task's bytes."""
        if not self.total or not need:
            return
        with self.changed:
            self.in_use -= need
            self.changed.notify_all()


def device_budget(tasks: list, jobs: int, free: int) -> DeviceBudget:
    """The budget for a run: the free device memory less each worker's floor, where any task holds device bytes."""
    if not any(getattr(t, "device_bytes", 0) for t in tasks) or free <= 0:
        return DeviceBudget(0)
    return DeviceBudget(max(WORKER_DEVICE_FLOOR, free - jobs * WORKER_DEVICE_FLOOR))
