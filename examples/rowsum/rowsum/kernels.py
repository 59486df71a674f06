"""Row-sum kernels in numpy: the one under test, and planted faults that the example's controls stand in with.

Each takes the family's ABI by keyword: x (bf16 bit patterns [rows, length]), out (fp32 [rows]) and length.
"""

from __future__ import annotations

import numpy as np

BLOCK = 256  # elements a block sums on its own before the blocks are added in order


def values(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns as fp32 values."""
    return (x.astype(np.uint32) << 16).view(np.float32)


def block_sums(v: np.ndarray, block: int) -> np.ndarray:
    """Each row's sum: sequential fp32 sums of `block` elements, then the blocks' sums added in order."""
    rows, length = v.shape
    padded = np.zeros((rows, -(-length // block) * block), np.float32)
    padded[:, :length] = v
    partial = np.cumsum(padded.reshape(rows, -1, block), axis=2, dtype=np.float32)[:, :, -1]
    return np.cumsum(partial, axis=1, dtype=np.float32)[:, -1]


def rowsum(x, out, *, length):
    """The kernel under test: fixed blocks, so a row's bits never depend on the batch."""
    out[:] = block_sums(values(x), BLOCK)


def rowsum_block_from_batch(x, out, *, length):
    """Planted fault: the block size follows the number of rows, as a kernel tuning its split to the batch."""
    out[:] = block_sums(values(x), BLOCK if x.shape[0] < 8 else BLOCK // 4)


def rowsum_bf16_accumulator(x, out, *, length):
    """Planted fault: the running sum is kept in bf16."""
    acc = np.zeros(x.shape[0], np.float32)
    for v in values(x).T:
        acc = ((acc + v).view(np.uint32) + 0x8000 & 0xFFFF0000).view(np.float32)
    out[:] = acc


def rowsum_last_dropped(x, out, *, length):
    """Planted fault: the last element of each row is never read."""
    out[:] = block_sums(values(x)[:, :-1], BLOCK)


def rowsum_blocks_in_bf16(x, out, *, length):
    """Planted fault: each block's sum is rounded to bf16 before the blocks are added."""
    v = values(x)
    rows, n = v.shape
    padded = np.zeros((rows, -(-n // BLOCK) * BLOCK), np.float32)
    padded[:, :n] = v
    partial = np.cumsum(padded.reshape(rows, -1, BLOCK), axis=2, dtype=np.float32)[:, :, -1]
    partial = ((partial.view(np.uint32) + 0x8000) & 0xFFFF0000).view(np.float32)
    out[:] = np.cumsum(partial, axis=1, dtype=np.float32)[:, -1]
