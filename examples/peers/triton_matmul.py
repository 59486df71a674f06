"""A Triton split-K matmul as peers on the matmul ABI: out = a b^T of bf16 a [M, K] and b [N, K].

Stage 1, grid (ceil(M / 64), ceil(N / 128), S): a program takes a 64 x 128 tile of out over piece s of K (the
ceil(K / 64) k tiles cut into S runs of ceil(tiles / S), as the matmul family declares pieces), accumulating
tl.dot of bf16 tiles in fp32 in k-tile order; with S = 1 it writes out directly, else its fp32 partial to a
workspace [S, M, N]. Stage 2 adds the pieces in order s = 0 .. S - 1 in fp32 and rounds to out's format (bf16
RN-even). See _triton_matmul_kernels.py.

Two peers differ only in how S is chosen:
- split_fixed: S = 4 for every call, so a row's pieces depend on K alone;
- split_by_rows: S from the number of output tiles and the SM count, as split-K heuristics do (more pieces when
  few rows leave the GPU idle, at most 16): a row's pieces, and so its bits, follow the batch it sits in.
"""

from __future__ import annotations

import importlib

if __package__:  # imported as examples.peers.triton_matmul
    from . import _common as common
    from .torch_trio import check_matmul
else:  # imported as triton_matmul, from the contract's folder
    import _common as common
    from torch_trio import check_matmul

FIXED_SPLIT = 4
MAX_SPLIT = 16
BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 64
MERGE_BLOCK = 1024


def split_fixed(a, b, out, *, m, n, k):
    """Split-K matmul in four pieces of K for every call."""
    run(a, b, out, m, n, k, lambda torch, tiles, k_tiles: FIXED_SPLIT)


def split_by_rows(a, b, out, *, m, n, k):
    """Split-K matmul with the piece count chosen from the output tiles (so from M) and the SM count."""
    def by_rows(torch, tiles: int, k_tiles: int) -> int:
        sms = int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)
        return max(1, min(MAX_SPLIT, k_tiles, -(-2 * sms // tiles)))
    run(a, b, out, m, n, k, by_rows)


def kernels():
    """The Triton kernels' module, imported on first use (Triton loads only where a peer runs)."""
    name = f"{__package__}._triton_matmul_kernels" if __package__ else "_triton_matmul_kernels"
    return importlib.import_module(name)


def run(a, b, out, m, n, k, choose_split) -> None:
    """Both stages on CuPy's current stream; the workspace from torch's allocator."""
    import cupy
    import torch

    check_matmul(a, b, out, m, n, k)
    m, n, k = int(m), int(n), int(k)
    ops = kernels()
    with common.torch_on_cupy_stream(torch, cupy):
        ta, tb = common.as_bf16(torch, cupy, a), common.as_bf16(torch, cupy, b)
        to = torch.from_dlpack(out) if out.dtype == cupy.float32 else common.as_bf16(torch, cupy, out)
        k_tiles = -(-k // BLOCK_K)
        grid_mn = (-(-m // BLOCK_M), -(-n // BLOCK_N))
        split = int(choose_split(torch, grid_mn[0] * grid_mn[1], k_tiles))
        per = -(-k_tiles // split)
        target = to if split == 1 else torch.empty((split, m, n), device=ta.device, dtype=torch.float32)
        ops.split_partials[(*grid_mn, split)](ta, tb, target, m, n, k, per, ta.stride(0), tb.stride(0),
                                              BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4,
                                              num_stages=4)
        if split > 1:
            ops.split_merge[(-(-m * n // MERGE_BLOCK),)](target, to, m * n, SPLIT=split, BLOCK=MERGE_BLOCK)
