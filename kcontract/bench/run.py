"""Time every CUDA entry's bench calls (one per distinct kernel and shape) against the measured ceilings."""

from __future__ import annotations

from typing import Callable

from kcontract.bench.call import materialise
from kcontract.bench.ceiling import mma_ceiling, read_ceiling
from kcontract.bench.timing import Timer
from kcontract.bench.torch_sdpa import sdpa_us

MAX_COPIES = 32  # buffer sets a graph rotates through, so that small calls read DRAM, not L2


def bench_entries(loaded, entries, keys: list[int], rows: list[int], repeat: int,
                  progress: Callable[[str], None] = lambda line: None) -> dict:
    """{"ceiling": {...}, "rows": [{shape, rows, keys, us, graph_us, bytes, gbps, read_gbps, ratio, torch_us}]}."""
    import cupy

    from kcontract.launch.cuda import CudaLauncher

    timer = Timer(cupy)
    ceiling = read_ceiling(cupy, timer) | mma_ceiling(cupy, timer)
    progress(f"read ceiling {ceiling['read_gbps']:.0f} GB/s (copy {ceiling['copy_gbps']:.0f} GB/s); "
             f"mma.sync bf16 ceiling {ceiling['mma_tflops']:.0f} TFLOP/s")
    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    done: set[tuple] = set()
    out = []
    for entry in entries:
        launcher = CudaLauncher(loaded, entry, entry.kernel)
        for call in entry.family.bench_calls(keys, rows):
            key = (launcher.provenance()["cubin_sha256"], call.label, call.rows, call.keys)
            if key in done:
                continue
            done.add(key)
            out.append(_time_call(cupy, timer, launcher, call, l2, repeat, ceiling, entry.name))
            progress(_line(out[-1]))
        launcher.close()
    return {"ceiling": ceiling, "rows": out}


def _time_call(cupy, timer: Timer, launcher, call, l2: int, repeat: int, ceiling: dict, entry: str) -> dict:
    """Events (L2 flushed), graph replays over rotating buffers, and torch on the same call."""
    with timer.stream:  # inputs made on the timing stream, finished before the first launch
        sets = [materialise(cupy, call, 0)]
    timer.stream.synchronize()
    us = timer.events(lambda s: launcher.launch_steps(call.launches, sets[0], s), repeat)
    copies = max(1, min(MAX_COPIES, -(-4 * l2 // call.bytes)))
    with timer.stream:
        sets += [materialise(cupy, call, c) for c in range(1, copies)]
    timer.stream.synchronize()
    graph_us = timer.graph([lambda s, v=v: launcher.launch_steps(call.launches, v, s) for v in sets])
    del sets
    cupy.get_default_memory_pool().free_all_blocks()
    torch_us, torch_note = sdpa_us(timer, call.sdpa, repeat)
    return timing_row(entry, call, us, graph_us, ceiling, torch_us, torch_note)


def timing_row(entry: str, call, us: float, graph_us: float, ceiling: dict, torch_us: float | None,
               torch_note: str) -> dict:
    """A bench row: the call's times against the run's read and mma ceilings, torch beside."""
    gbps = call.bytes / us / 1e3
    row = {"entry": entry, "shape": call.label, "rows": call.rows, "keys": call.keys, "us": round(us, 2),
           "graph_us": round(graph_us, 2), "bytes": call.bytes, "gbps": round(gbps, 1),
           "read_gbps": round(ceiling["read_gbps"], 1), "ratio": round(gbps / ceiling["read_gbps"], 3),
           "torch_us": None if torch_us is None else round(torch_us, 2), "torch": torch_note,
           "tflops": round(call.flops / us / 1e6, 1),
           "torch_tflops": None if torch_us is None else round(call.flops / torch_us / 1e6, 1)}
    if call.mma_flops:
        issued = call.mma_flops / us / 1e6
        row |= {"mma_tflops": round(ceiling["mma_tflops"], 1), "issued_tflops": round(issued, 1),
                "mma_ratio": round(call.flops / us / 1e6 / ceiling["mma_tflops"], 3),
                "issued_ratio": round(issued / ceiling["mma_tflops"], 3)}
    return row


def _line(row: dict) -> str:
    torch = f"torch {row['torch_us']} us" if row["torch_us"] is not None else row["torch"]
    if row["shape"].startswith("prompt"):  # compute-bound: useful TFLOP/s over visible keys
        if row["torch_us"] is not None:
            torch += f" ({row['torch']}, {row['torch_tflops']} TFLOP/s)"
        mma = ""
        if "mma_ratio" in row:
            mma = (f" = {100 * row['mma_ratio']:.0f} % of the mma ceiling ({row['issued_tflops']} TFLOP/s issued, "
                   f"{100 * row['issued_ratio']:.0f} %)")
        return (f"{row['shape']} x{row['rows']} ending at {row['keys']} keys: {row['us']} us "
                f"({row['graph_us']} us in a graph), {row['tflops']} TFLOP/s useful{mma}; {torch}")
    return (f"{row['shape']} x{row['rows']} at {row['keys']} keys: {row['us']} us ({row['graph_us']} us in a graph), "
            f"{row['gbps']} GB/s = {100 * row['ratio']:.0f} % of the read ceiling; {torch}")
