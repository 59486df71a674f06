"""Tensor maps (TMA descriptors) of device buffers, encoded by the CUDA driver's cuTensorMapEncodeTiled.

A map is 128 opaque bytes that a kernel takes by value (a `__grid_constant__` parameter); it is returned as a
one-element numpy array of that size, which CuPy passes by value. The driver library is the one CuPy runs on, so
no CUDA Python package is needed.
"""

from __future__ import annotations

import ctypes
import functools
import sys

import numpy as np

from kcontract.launch.base import KernelFailure
from kcontract.problem import TensorMap

MAP_BYTES, MAP_ALIGN = 128, 64  # sizeof and alignof CUtensorMap
DATA_TYPES = {"bf16": (9, 2), "fp16": (6, 2), "fp32": (7, 4)}  # CUtensorMapDataType, bytes per element
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
L2_PROMOTION_256B = 3
MAX_BOX = 256  # elements per box dimension


@functools.cache
def _driver():
    """The CUDA driver library with cuTensorMapEncodeTiled's signature."""
    lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")  # the driver CuPy runs on
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64), ctypes.POINTER(u64),
                   ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.cuGetErrorName.restype = ctypes.c_int
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return lib


def problems(shape: tuple[int, ...], spec: TensorMap) -> str | None:
    """Why a [rows, inner] buffer of `shape` cannot have this map (the driver's rules), or None."""
    if spec.fmt not in DATA_TYPES or spec.swizzle not in SWIZZLES:
        return f"a format in {', '.join(DATA_TYPES)} and a swizzle in {', '.join(map(str, SWIZZLES))} bytes"
    itemsize = DATA_TYPES[spec.fmt][1]
    if len(shape) != 2:
        return f"a 2D input, given {len(shape)} dimensions"
    if (shape[1] * itemsize) % 16:
        return f"rows of a multiple of 16 bytes, given {shape[1]} elements of {itemsize} bytes"
    if not all(0 < b <= MAX_BOX for b in spec.box):
        return f"box dimensions from 1 to {MAX_BOX}, given {spec.box}"
    if spec.swizzle and spec.box[0] * itemsize > spec.swizzle:
        return f"a box row of at most the {spec.swizzle}-byte swizzle, given {spec.box[0] * itemsize} bytes"
    return None


def encode(array, spec: TensorMap, label: str = "") -> np.ndarray:
    """The map of a C-contiguous 2D CuPy array, as a one-element array of 128 bytes (64-byte aligned)."""
    why = problems(tuple(array.shape), spec)
    if why is None and not array.flags.c_contiguous:
        why = "a C-contiguous input"
    if why:
        raise KernelFailure(f"call {label}: the tensor map of {spec.input} needs {why}")
    rows, inner = array.shape
    dtype, itemsize = DATA_TYPES[spec.fmt]
    raw = np.zeros(MAP_BYTES + MAP_ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % MAP_ALIGN
    value = raw[start:start + MAP_BYTES].view(np.dtype((np.void, MAP_BYTES)))
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    result = _driver().cuTensorMapEncodeTiled(
        ctypes.c_void_p(value.ctypes.data), dtype, 2, ctypes.c_void_p(array.data.ptr), (u64 * 2)(inner, rows),
        (u64 * 1)(inner * itemsize), (u32 * 2)(*spec.box), (u32 * 2)(1, 1), 0, SWIZZLES[spec.swizzle],
        L2_PROMOTION_256B, 0)
    if result != 0:
        raise KernelFailure(f"call {label}: cuTensorMapEncodeTiled refused the map of {spec.input} "
                            f"({_error_name(result)}; shape {rows} x {inner}, box {spec.box}, swizzle {spec.swizzle})")
    return value


def _error_name(code: int) -> str:
    name = ctypes.c_char_p()
    if _driver().cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode()
    return f"CUresult {code}"
