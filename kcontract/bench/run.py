"""Time every CUDA entry's bench calls (one per distinct kernel and shape) against the measured ceilings."""

from __future__ import annotations

from typing import Callable

from kcontract.bench.call import materialise
from kcontract.bench.ceiling import mma_ceiling, read_ceiling
from kcontract.bench.timing import Timer
from kcontract.builds.builds import Builds

MAX_COPIES = 32  # buffer sets a graph rotates through, so that small calls read DRAM, not L2


def bench_entries(loaded, entries, sizes: dict[str, tuple[int, ...]], repeat: int,
                  progress: Callable[[str], None] = lambda line: None) -> dict:
    """{"ceiling": {...}, "rows": [{entry, call, size, us, graph_us, bytes, gbps, ratio, peer_us, ...}]}; `sizes`
    overrides each family's `bench_sizes` by name."""
    import cupy

    from kcontract.launch.cuda import CudaLauncher, device_sm, target_for

    timer = Timer(cupy)
    ceiling = read_ceiling(cupy, timer) | mma_ceiling(cupy, timer)
    progress(f"read ceiling {ceiling['read_gbps']:.0f} GB/s (copy {ceiling['copy_gbps']:.0f} GB/s); "
             f"mma.sync bf16 ceiling {ceiling['mma_tflops']:.0f} TFLOP/s")
    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    done: set[tuple] = set()
    out = []
    builds, sm = Builds.of(loaded), target_for(device_sm(cupy), list(loaded.targets))
    for entry in entries:
        launcher = CudaLauncher(loaded, entry, entry.kernel, builds.kernel(entry.kernel.compiled, [sm]))
        entry.family.exports = builds.family_exports(entry.kernel.compiled, entry.family)
        wanted = {**type(entry.family).bench_sizes, **{k: v for k, v in sizes.items()
                                                       if k in type(entry.family).bench_sizes}}
        for call in entry.family.bench_calls(wanted):
            key = (launcher.provenance()["cubin_sha256"], repr(call.launches), call.label, call.size_text)
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
    peer_us, peer_note = call.peer(timer, repeat) if call.peer is not None else (None, "no peer")
    return timing_row(entry, call, us, graph_us, ceiling, peer_us, peer_note)


def timing_row(entry: str, call, us: float, graph_us: float, ceiling: dict, peer_us: float | None,
               peer_note: str) -> dict:
    """A bench row: the call's times against the run's read and mma ceilings, its peer beside."""
    gbps = call.bytes / us / 1e3
    row = {"entry": entry, "call": call.label, "size": dict(call.size), "bound": call.bound, "us": round(us, 2),
           "graph_us": round(graph_us, 2), "bytes": call.bytes, "gbps": round(gbps, 1),
           "read_gbps": round(ceiling["read_gbps"], 1), "ratio": round(gbps / ceiling["read_gbps"], 3),
           "peer_us": None if peer_us is None else round(peer_us, 2), "peer": peer_note,
           "tflops": round(call.flops / us / 1e6, 1),
           "peer_tflops": None if peer_us is None else round(call.flops / peer_us / 1e6, 1)}
    if call.mma_flops:
        issued = call.mma_flops / us / 1e6
        row |= {"mma_tflops": round(ceiling["mma_tflops"], 1), "issued_tflops": round(issued, 1),
                "mma_ratio": round(call.flops / us / 1e6 / ceiling["mma_tflops"], 3),
                "issued_ratio": round(issued / ceiling["mma_tflops"], 3)}
    return row


def size_text(size: dict) -> str:
    """`rows 4, n 131072`."""
    return ", ".join(f"{k} {v}" for k, v in size.items())


def _line(row: dict) -> str:
    peer = f"peer {row['peer']} {row['peer_us']} us" if row["peer_us"] is not None else f"peer: {row['peer']}"
    head = f"{row['call']} ({size_text(row['size'])}): {row['us']} us ({row['graph_us']} us in a graph)"
    if row["bound"] == "compute":  # judged by useful TFLOP/s against the mma ceiling
        if row["peer_us"] is not None:
            peer += f" ({row['peer_tflops']} TFLOP/s)"
        mma = ""
        if "mma_ratio" in row:
            mma = (f" = {100 * row['mma_ratio']:.0f} % of the mma ceiling ({row['issued_tflops']} TFLOP/s issued, "
                   f"{100 * row['issued_ratio']:.0f} %)")
        return f"{head}, {row['tflops']} TFLOP/s useful{mma}; {peer}"
    return f"{head}, {row['gbps']} GB/s = {100 * row['ratio']:.0f} % of the read ceiling; {peer}"
