"""How many workers `--jobs auto` takes: as many as the cores, host memory and (for GPU tasks) device memory hold."""

from __future__ import annotations

from kcontract.capacity import free_gpu_memory, physical_memory, size_text, usable_cores
from kcontract.contract.loaded import LoadedContract
from kcontract.family.cases import main_cases
from kcontract.runner.budget import WORKER_DEVICE_FLOOR
from kcontract.session.plan import device_bytes

HOST_WORKER_FLOOR = 1 << 30  # host memory a worker holds at least (interpreter, CUDA context, buffers)


def auto_jobs(loaded: LoadedContract, gpu: bool) -> tuple[int, str]:
    """Workers for `--jobs auto` and why: one per core, as many as host memory holds at the contract's largest
    case, and (when tasks use the GPU) as many as its free memory holds at twice a worker's floor; the device
    budget then starts each task once its largest case fits."""
    cores = usable_cores()
    need = max([HOST_WORKER_FLOOR] + [e.family.case_bytes(c) for e in loaded.entries for c in main_cases(e.family)])
    host = physical_memory() // need if physical_memory() else cores
    jobs, why = min(cores, host), [f"{cores} cores", f"{size_text(physical_memory())} host / {size_text(need)}"]
    if gpu:
        free, largest = free_gpu_memory(), max([0] + [device_bytes(e) for e in loaded.entries])
        jobs = min(jobs, free // (2 * WORKER_DEVICE_FLOOR))
        why.append(f"{size_text(free)} GPU free, each task started once its largest case fits (at most "
                   f"{size_text(largest)})")
    jobs = max(1, jobs)
    return jobs, f"{jobs} workers ({', '.join(why)})"
