"""Plumbing the peers share: the ABI checks, CuPy arrays as torch tensors on CuPy's stream, each row's keys.

At module import only the standard library and numpy load: torch and CuPy load inside the functions, so
`kcontract list` and `kcontract check` import the peers on machines that have neither.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np


@dataclass
class Batch:
    """One decode call as torch tensors on the GPU, with the host facts the peers size their work by."""

    q: object  # [B, Hq, D] bf16
    k_cache: object  # [S, ring, Hk, D] bf16
    v_cache: object  # [S, ring, Hk, D] bf16
    row_pos: object  # [B] int32: each row's last visible key (its own position)
    row_slot: object  # [B] int32: each row's cache slot
    first: object  # [B] int32: each row's first visible key
    count: object  # [B] int64: each row's visible keys, pos - first + 1
    count_host: np.ndarray  # [B] int64, the same on the host
    pos_host: np.ndarray  # [B] int64: row_pos on the host
    win: int
    ring: int
    scale: float

    @property
    def rows(self) -> int:
        return int(self.q.shape[0])

    @property
    def hq(self) -> int:
        return int(self.q.shape[1])

    @property
    def hk(self) -> int:
        return int(self.k_cache.shape[2])

    @property
    def head_dim(self) -> int:
        return int(self.q.shape[2])

    @property
    def group(self) -> int:
        """Query heads per key head: query head h reads key head h // group."""
        return self.hq // self.hk

    @property
    def first_host(self) -> np.ndarray:
        """[B] int64: each row's first visible key, on the host."""
        return self.pos_host - self.count_host + 1

    @property
    def longest(self) -> int:
        """The most visible keys of any row."""
        return int(self.count_host.max())


def host(array) -> np.ndarray:
    """A host copy of a small array: CuPy's .get() (it waits on the current stream), else numpy's view."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "get"):
        return array.get()
    return np.asarray(array)


def need(ok: bool, what: str) -> None:
    """Raise ValueError(what) unless ok: a peer's refusal of its arguments, in one line."""
    if not ok:
        raise ValueError(what)


def check_abi(q, k_cache, v_cache, row_pos, row_slot, out, kv_heads) -> None:
    """Raise ValueError, in one line, unless the buffers have the decode ABI's dtypes and shapes."""
    for name, array, ndim in (("q", q, 3), ("k_cache", k_cache, 4), ("v_cache", v_cache, 4), ("out", out, 3)):
        need(str(array.dtype) == "uint16", f"{name}: uint16 bf16 bits expected, given {array.dtype}")
        need(array.ndim == ndim, f"{name}: {ndim} dimensions expected, given shape {tuple(array.shape)}")
        need(bool(array.flags.c_contiguous), f"{name}: a C-contiguous array expected")
    for name, array in (("row_pos", row_pos), ("row_slot", row_slot)):
        need(str(array.dtype) == "int32", f"{name}: int32 expected, given {array.dtype}")
        need(array.ndim == 1 and array.shape[0] == q.shape[0],
             f"{name}: shape ({q.shape[0]},) expected, given {tuple(array.shape)}")
    rows, hq, dim = q.shape
    need(rows >= 1, "q: at least one row expected")
    need(tuple(k_cache.shape) == tuple(v_cache.shape),
         f"k_cache and v_cache of one shape expected, given {tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    need(k_cache.shape[3] == dim, f"k_cache head dim {k_cache.shape[3]} differs from q's {dim}")
    need(k_cache.shape[2] == int(kv_heads), f"k_cache has {k_cache.shape[2]} key heads, kv_heads says {kv_heads}")
    need(hq % int(kv_heads) == 0, f"q heads {hq} are not a multiple of kv_heads {kv_heads}")
    need(tuple(out.shape) == tuple(q.shape), f"out: shape {tuple(q.shape)} expected, given {tuple(out.shape)}")


def visible_counts(pos_host: np.ndarray, slot_host: np.ndarray, *, win: int, ring: int, slots: int) -> np.ndarray:
    """Each row's visible keys pos - first + 1, checked against the ring and the slots."""
    pos = pos_host.astype(np.int64)
    first = np.maximum(pos - win + 1, 0) if win > 0 else np.zeros_like(pos)
    count = pos - first + 1
    if (pos < 0).any():
        raise ValueError(f"row_pos: non-negative positions expected, given {pos.tolist()}")
    if ((slot_host < 0) | (slot_host >= slots)).any():
        raise ValueError(f"row_slot: slots in [0, {slots}) expected, given {slot_host.tolist()}")
    if count.max() > ring:
        raise ValueError(f"a row sees {int(count.max())} keys, more than the ring's {ring} cache rows")
    return count


def make_batch(torch, q, k_cache, v_cache, row_pos, row_slot, pos_host, slot_host, *, win, ring, scale) -> Batch:
    """A Batch from torch tensors (bf16 q and caches, int32 positions and slots on one device)."""
    win, ring = int(win), int(ring)
    count_host = visible_counts(np.asarray(pos_host), np.asarray(slot_host), win=win, ring=ring,
                                slots=int(k_cache.shape[0]))
    pos = row_pos.to(torch.int64)
    first = torch.clamp(pos - win + 1, min=0) if win > 0 else torch.zeros_like(pos)
    return Batch(q=q, k_cache=k_cache, v_cache=v_cache, row_pos=row_pos, row_slot=row_slot,
                 first=first.to(torch.int32), count=pos - first + 1, count_host=count_host,
                 pos_host=np.asarray(pos_host).astype(np.int64), win=win, ring=ring,
                 scale=float(np.float32(scale)))


def gather_padded(torch, batch: Batch, length: int):
    """K and V [B, Hk, length, D] holding each row's visible keys in position order from index 0, zeros past its
    count, and the mask [B, length] (True: a visible key). Keys are read from the ring at position % ring."""
    device = batch.q.device
    j = torch.arange(length, device=device, dtype=torch.int64)[None, :]  # [1, L]
    valid = j < batch.count[:, None]  # [B, L]
    position = batch.first.to(torch.int64)[:, None] + torch.where(valid, j, torch.zeros_like(j))  # pad: first key
    cache_row = torch.remainder(position, batch.ring)  # [B, L]
    slot = batch.row_slot.to(torch.int64)[:, None].expand_as(cache_row)  # [B, L]
    keep = valid[:, :, None, None]
    k = batch.k_cache[slot, cache_row].masked_fill(~keep, 0)  # [B, L, Hk, D]
    v = batch.v_cache[slot, cache_row].masked_fill(~keep, 0)
    return k.permute(0, 2, 1, 3).contiguous(), v.permute(0, 2, 1, 3).contiguous(), valid


def gather_packed(torch, batch: Batch):
    """K and V [total, Hk, D]: row 0's visible keys in position order, then row 1's, ...; and the int32
    cumulative key offsets [B + 1] (varlen layout)."""
    device = batch.q.device
    total = int(batch.count_host.sum())
    rows = torch.arange(batch.rows, device=device, dtype=torch.int64)
    row_of = torch.repeat_interleave(rows, batch.count, output_size=total)  # [total]: the row of each key
    ends = torch.cumsum(batch.count, dim=0)  # [B]
    starts = ends - batch.count
    offset = torch.arange(total, device=device, dtype=torch.int64) - starts[row_of]  # key index inside its row
    position = batch.first.to(torch.int64)[row_of] + offset
    cache_row = torch.remainder(position, batch.ring)
    slot = batch.row_slot.to(torch.int64)[row_of]
    cum = torch.zeros(batch.rows + 1, device=device, dtype=torch.int32)
    cum[1:] = ends.to(torch.int32)
    return batch.k_cache[slot, cache_row].contiguous(), batch.v_cache[slot, cache_row].contiguous(), cum


@contextlib.contextmanager
def torch_on_cupy_stream(torch, cupy):
    """torch's current device and stream set to CuPy's, so work orders with what kcontract launched there."""
    device = torch.device("cuda", cupy.cuda.Device().id)
    pointer = cupy.cuda.get_current_stream().ptr
    if pointer == 0:  # CuPy's null stream is the legacy default stream, torch's default stream too
        stream = torch.cuda.default_stream(device)
    else:
        stream = torch.cuda.ExternalStream(pointer, device=device)
    with torch.cuda.device(device), torch.cuda.stream(stream):
        yield


def as_bf16(torch, cupy, array):
    """A CuPy uint16 array of bf16 bits as a torch bf16 tensor on the same memory (DLPack, no copy)."""
    return torch.from_dlpack(array.view(cupy.int16)).view(torch.bfloat16)


def run_peer(core, q, k_cache, v_cache, row_pos, row_slot, out, *, win, ring, scale, kv_heads) -> None:
    """Check the ABI, hand the CuPy arrays to torch, run core(torch, batch) -> [B, Hq, D] bf16 on CuPy's current
    stream, and write its bits to `out`."""
    import cupy
    import torch

    check_abi(q, k_cache, v_cache, row_pos, row_slot, out, kv_heads)
    pos_host, slot_host = host(row_pos), host(row_slot)
    with torch_on_cupy_stream(torch, cupy):
        batch = make_batch(torch, as_bf16(torch, cupy, q), as_bf16(torch, cupy, k_cache),
                           as_bf16(torch, cupy, v_cache), torch.from_dlpack(row_pos), torch.from_dlpack(row_slot),
                           pos_host, slot_host, win=win, ring=ring, scale=scale)
        result = core(torch, batch)
        if tuple(result.shape) != tuple(q.shape) or result.dtype != torch.bfloat16:
            raise RuntimeError(f"peer returned {result.dtype} {tuple(result.shape)}, expected bf16 {tuple(q.shape)}")
        as_bf16(torch, cupy, out).copy_(result)


def first_line(error: BaseException) -> str:
    """`Type: the first line of the message`, cut at 300 characters."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"
