"""The GPU's read ceiling: a streaming read of a buffer far larger than L2 with 16-byte loads."""

from __future__ import annotations

READ_SOURCE = r'''
extern "C" __global__ void read_all(const uint4* __restrict__ data, unsigned long long n, unsigned* out) {
  unsigned acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const uint4 v = __ldg(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads; practically never stores
}
'''
READ_BYTES = 4 << 30  # far larger than any L2


def read_ceiling(cupy, timer, repeat: int = 10) -> dict:
    """GB/s of the streaming read, and of a device-to-device copy counted both ways."""
    kernel = cupy.RawKernel(READ_SOURCE, "read_all")
    data = cupy.full(READ_BYTES // 4, 0x01020304, dtype=cupy.uint32)
    out = cupy.zeros(1, dtype=cupy.uint32)
    n = READ_BYTES // 16
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    us = timer.events(lambda s: kernel((sms * 8,), (512,), (data, cupy.uint64(n), out), stream=s), repeat)
    half = data[: data.size // 2]
    dst = cupy.empty_like(half)

    def copy(stream) -> None:
        with stream:
            cupy.copyto(dst, half)

    copy_us = timer.events(copy, repeat)
    del data, half, dst
    cupy.get_default_memory_pool().free_all_blocks()
    return {"read_gbps": READ_BYTES / us / 1e3, "copy_gbps": 2 * (READ_BYTES // 2) / copy_us / 1e3}
