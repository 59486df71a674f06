"""torch's matmul (cuBLAS) and RMSNorm as peers on the matmul and rmsnorm ABIs: one call over the whole batch of
token rows, as a serving stack makes it, on CuPy's current stream (tensors through DLPack, no copies).

- matmul: out = a @ b.T of bf16 a [M, K] and b [N, K] through torch.matmul (bf16 out, cuBLAS with torch's
  defaults, reduced-precision split-K reductions allowed as torch allows them) or torch.mm(..., out_dtype=fp32);
- rms_norm: torch.nn.functional.rms_norm(x, (H,), w, eps) of bf16 x [M, H] and w [H], bf16 out.
"""

from __future__ import annotations

if __package__:  # imported as examples.peers.torch_trio
    from . import _common as common
else:  # imported as torch_trio, from the contract's folder
    import _common as common


def matmul(a, b, out, *, m, n, k):
    """torch.matmul(a, b.T) into out (bf16 bits, or fp32 through torch.mm's out_dtype)."""
    import cupy
    import torch

    check_matmul(a, b, out, m, n, k)
    with common.torch_on_cupy_stream(torch, cupy):
        ta, tb = common.as_bf16(torch, cupy, a), common.as_bf16(torch, cupy, b)
        if out.dtype == cupy.float32:
            torch.from_dlpack(out).copy_(torch.mm(ta, tb.t(), out_dtype=torch.float32))
        else:
            common.as_bf16(torch, cupy, out).copy_(torch.matmul(ta, tb.t()))


def rms_norm(x, w, out, *, hidden, eps):
    """torch.nn.functional.rms_norm of the rows of x with weight w, into out (bf16 bits)."""
    import cupy
    import torch

    for name, array in (("x", x), ("w", w), ("out", out)):
        common.need(str(array.dtype) == "uint16", f"{name}: uint16 bf16 bits expected, given {array.dtype}")
    common.need(x.ndim == 2 and x.shape[1] == int(hidden) and tuple(w.shape) == (int(hidden),)
                and tuple(out.shape) == tuple(x.shape), f"x [M, {hidden}], w [{hidden}] and out like x expected")
    with common.torch_on_cupy_stream(torch, cupy):
        y = torch.nn.functional.rms_norm(common.as_bf16(torch, cupy, x), (int(hidden),), common.as_bf16(torch, cupy, w),
                                         float(eps))
        common.as_bf16(torch, cupy, out).copy_(y)


def check_matmul(a, b, out, m, n, k) -> None:
    """Raise ValueError, in one line, unless the buffers have the matmul ABI's dtypes and shapes."""
    for name, array in (("a", a), ("b", b)):
        common.need(str(array.dtype) == "uint16", f"{name}: uint16 bf16 bits expected, given {array.dtype}")
        common.need(bool(array.flags.c_contiguous), f"{name}: a C-contiguous array expected")
    common.need(tuple(a.shape) == (int(m), int(k)) and tuple(b.shape) == (int(n), int(k)),
                f"a [{m}, {k}] and b [{n}, {k}] expected, given {tuple(a.shape)} and {tuple(b.shape)}")
    common.need(tuple(out.shape) == (int(m), int(n)) and str(out.dtype) in ("uint16", "float32"),
                f"out [{m}, {n}] of bf16 bits or fp32 expected, given {out.dtype} {tuple(out.shape)}")
