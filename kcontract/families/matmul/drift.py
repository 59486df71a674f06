"""The matmul family's answer to `kcontract drift`: an mm, addmm or linear as an entry at the captured K and N,
its cases at the row counts the op ran with, and a kernel module that calls torch's op on the matmul ABI."""

from __future__ import annotations

from kcontract.family.torch_op import FromTorch, TorchOp

OPS = {"aten.mm", "aten.addmm", "aten.linear", "aten.matmul"}


def from_torch_op(op: TorchOp) -> FromTorch | None:
    """The entry, or None for another family's op."""
    if op.name not in OPS:
        return None
    (a_shape, dtype), (b_shape, _) = _ab(op.name, op.operands)
    if dtype not in ("float32", "bfloat16"):
        return FromTorch(said=f"{op.name} runs in {dtype}; the matmul ABI takes bf16 inputs with fp32 or bf16 "
                              "outputs")
    k, n = a_shape[-1], b_shape[-1]
    entry = {
        "description": f"torch's {op.name} from {op.module or 'the model'} of {op.target} ({dtype}, {op.device}), "
                       f"as drift captured it: K {k}, N {n}",
        "family": "matmul",
        "gates": [1, 2],
        "arithmetic": {"accumulate": "fp32", "out": "fp32" if dtype == "float32" else "bf16"},
        "cases": [{"name": f"m{m}_k{k}_n{n}", "m": m, "k": k, "n": n} for m in _rows(op)],
    }
    return FromTorch(entry, KERNELS.format(device=op.device, dtype=dtype, op=op.name), "torch_op", "row_by_row")


def _ab(name: str, operands: list) -> list:
    """The a [m, k] and b [k, n] operands (addmm's bias left out)."""
    return operands[1:3] if name == "aten.addmm" else operands[:2]


def _rows(op: TorchOp) -> list[int]:
    """The row counts the op ran with, alone and in each batch."""
    return sorted({_ab(op.name, inputs)[0][0][0] for inputs in [op.operands, *op.batched]})


KERNELS = '''"""Kernels written by `kcontract drift` on the matmul ABI (a [m, k] and b [n, k] of bf16 bits, out [m, n] of
bf16 bits or fp32): torch's {op} in {dtype} on {device}, over the whole call and a row at a time."""

import numpy as np
import torch

DEVICE, DTYPE = "{device}", torch.{dtype}


def _tensor(array):
    """bf16 bits (numpy or CuPy, uint16) as a torch tensor of DTYPE on DEVICE."""
    if isinstance(array, np.ndarray):
        bits = torch.from_numpy(array.view(np.int16).copy())
    else:
        import cupy

        cupy.cuda.get_current_stream().synchronize()
        bits = torch.from_dlpack(array.view(cupy.int16))
    return bits.view(torch.bfloat16).to(device=DEVICE, dtype=DTYPE)


def _store(out, value):
    """The result into out: bf16 bits, or fp32."""
    bf16 = str(out.dtype) == "uint16"
    value = value.to(torch.bfloat16).view(torch.int16) if bf16 else value.to(torch.float32)
    if isinstance(out, np.ndarray):
        target = torch.from_numpy(out.view(np.int16) if bf16 else out)
    else:
        import cupy

        target = torch.from_dlpack(out.view(cupy.int16) if bf16 else out)
    target.copy_(value)
    if DEVICE != "cpu":
        torch.cuda.synchronize()


def torch_op(a, b, out, *, m, n, k):
    """out = a b^T by torch.mm over the whole call, as the model ran it."""
    _store(out, torch.mm(_tensor(a), _tensor(b).t()))


def row_by_row(a, b, out, *, m, n, k):
    """out = a b^T by torch.mm one row at a time: a row's sum never depends on the call's other rows."""
    ta, tb = _tensor(a), _tensor(b).t()
    _store(out, torch.cat([torch.mm(ta[i:i + 1], tb) for i in range(ta.shape[0])]))
'''
