"""Benchmark calls of the matmul family, and torch.matmul (cuBLAS) on the same call as the peer."""

from __future__ import annotations

import numpy as np

from kcontract.problem import BenchCall, OutputSpec

A_RMS, B_RMS = 1.0, 0.02  # realistic magnitudes: activations and weights; never time on zeros


def matmul_call(rows: int, k: int, n: int, arith, launches, tile_rows: int, tile_cols: int) -> BenchCall:
    """`rows` token rows of K against N weight rows: a and b read once, out written once; the tensor cores issue
    `tile_rows` x `tile_cols` outputs per tile whatever part of them the call fills."""
    out_bytes = 2 if arith.out == "bf16" else 4
    (launch,) = launches
    tiles = launch.grid[0] * tile_cols, launch.grid[1] * tile_rows
    issued_k = arith.issued_terms(k)
    return BenchCall(label=f"k{k} n{n} {arith.out}", size={"rows": rows, "k": k, "n": n},
                     random_inputs={"a": ((rows, k), A_RMS), "b": ((n, k), B_RMS)}, fixed_inputs={},
                     outputs={"out": OutputSpec((rows, n), arith.out)},
                     scalars={"m": np.int32(rows), "n": np.int32(n), "k": np.int32(k)}, launches=launches,
                     bytes=2 * (rows + n) * k + out_bytes * rows * n, flops=2 * rows * n * k,
                     mma_flops=2 * tiles[0] * tiles[1] * issued_k, bound="compute",
                     peer=lambda timer, repeat: torch_matmul(timer, repeat, rows, k, n, arith.out))


def torch_matmul(timer, repeat: int, rows: int, k: int, n: int, out: str):
    """Median microseconds of torch.matmul (cuBLAS) on the same call: bf16 a @ b.T to the entry's format."""
    try:
        import torch
    except ImportError:
        return None, "no torch"
    a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) * A_RMS
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * B_RMS
    stream = torch.cuda.ExternalStream(timer.stream.ptr)
    fp32 = out == "fp32"

    def launch(_stream) -> None:
        with torch.cuda.stream(stream):
            torch.mm(a, b.t(), out_dtype=torch.float32) if fp32 else torch.matmul(a, b.t())
    try:
        return timer.events(launch, repeat), "torch.matmul (cuBLAS)" + (", fp32 out" if fp32 else "")
    except (TypeError, RuntimeError) as error:  # a torch without out_dtype, or a refused shape
        return None, f"torch.matmul: {str(error).splitlines()[0][:80]}"
    finally:
        del a, b
        torch.cuda.empty_cache()
