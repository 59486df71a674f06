"""The fused fp32 kernels' bodies as a whole CUDA source, laid out as CuPy's ElementwiseKernel lays them out."""

from __future__ import annotations

from kcontract.numerics.fused import SOURCES

CTYPES = {"float64": "double"}


def elementwise_source(name: str) -> bytes:
    """A `__global__` function `kcontract_<name>` running the body on element i of each parameter."""
    params, out, body = SOURCES[name]
    args = [p.split() for p in params.split(",")] + [out.split()]
    signature = ", ".join(f"{CTYPES[t]}* {n}_" for t, n in args)
    locals_ = "".join(f"    {CTYPES[t]} {n} = {n}_[i];\n" for t, n in args[:-1])
    t, n = args[-1]
    return (f'extern "C" __global__ void kcontract_{name}({signature}, long long size) {{\n'
            f"    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n    if (i >= size) return;\n"
            f"{locals_}    {CTYPES[t]} &{n} = {n}_[i];\n{body}\n}}\n").encode()
