"""The GPU's ceilings, measured in the run: a streaming read of a buffer far larger than L2 with 16-byte loads,
and bf16 mma.sync (m16n8k16, fp32 accumulate) with every warp's eight accumulators independent."""

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

MMA_SOURCE = r'''
extern "C" __global__ void mma_loop(int iters, float* out) {
  float acc[8][4];
  for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  const unsigned a = 0x3f803f80u ^ (threadIdx.x & 1u), b = 0x3c003c00u;  // bf16 pairs near 1 and 2^-7
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                   "{%8, %9}, {%0, %1, %2, %3};"
                   : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                   : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
    }
  }
  float sum = 0.0f;
  for (int j = 0; j < 8; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (sum == 1234.5f) out[0] = sum;  // keeps the mma; practically never stores
}
'''
MMA_ITERS = 4096  # per warp: 8 x 4096 mma of 4096 flops each
MMA_FLOPS = 2 * 16 * 8 * 16  # one m16n8k16


def read_launch(cupy, data, out):
    """The streaming read of `data` (uint32, a whole number of 16-byte loads) over every SM, as a launch that takes
    its stream."""
    kernel = cupy.RawKernel(READ_SOURCE, "read_all")
    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"] * 8
    loads = cupy.uint64(data.nbytes // 16)
    return lambda stream: kernel((blocks,), (512,), (data, loads, out), stream=stream)


def read_ceiling(cupy, timer, repeat: int = 10) -> dict:
    """GB/s of the streaming read, and of a device-to-device copy counted both ways."""
    data = cupy.full(READ_BYTES // 4, 0x01020304, dtype=cupy.uint32)
    out = cupy.zeros(1, dtype=cupy.uint32)
    us = timer.events(read_launch(cupy, data, out), repeat)
    half = data[: data.size // 2]
    dst = cupy.empty_like(half)

    def copy(stream) -> None:
        with stream:
            cupy.copyto(dst, half)

    copy_us = timer.events(copy, repeat)
    del data, half, dst
    cupy.get_default_memory_pool().free_all_blocks()
    return {"read_gbps": READ_BYTES / us / 1e3, "copy_gbps": 2 * (READ_BYTES // 2) / copy_us / 1e3}


def mma_ceiling(cupy, timer, repeat: int = 10) -> dict:
    """TFLOP/s of bf16 mma.sync with fp32 accumulation over every SM, 32 warps each."""
    kernel = cupy.RawKernel(MMA_SOURCE, "mma_loop")
    out = cupy.zeros(1, dtype=cupy.float32)
    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"] * 4
    us = timer.events(lambda s: kernel((blocks,), (256,), (cupy.int32(MMA_ITERS), out), stream=s), repeat)
    return {"mma_tflops": blocks * 8 * 8 * MMA_ITERS * MMA_FLOPS / us / 1e6}
