// Warpgroup tensor-core helpers (sm_90a): shared-memory matrix descriptors, the wgmma fences and the two
// m64n64k16 bf16 forms a prompt kernel uses: Q K^T with both operands in shared memory (K-major), and p V with p
// in registers (the mma.sync m16n8k16 A fragment per warp) and V in shared memory (MN-major, transposed).
// Both accumulate into fp32 d[32]: thread (warp w of the warpgroup, lane 4 gr + c4) holds rows 16 w + gr and
// + 8, columns 8 t + 2 c4 and + 1 of n-tile t as d[4 t .. 4 t + 3] (row gr: + 0, + 1; row gr + 8: + 2, + 3).
#pragma once

namespace wg {

// A shared-memory matrix descriptor: start address, leading and stride byte offsets (16-byte units), swizzle
// mode in bits 62-63 (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
__device__ __forceinline__ unsigned long long smem_desc(const void* p, unsigned lbo, unsigned sbo, unsigned mode) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  return static_cast<unsigned long long>((addr >> 4) & 0x3fff) |
         (static_cast<unsigned long long>((lbo >> 4) & 0x3fff) << 16) |
         (static_cast<unsigned long long>((sbo >> 4) & 0x3fff) << 32) |
         (static_cast<unsigned long long>(mode & 3) << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// Generic-proxy writes to shared memory (cp.async, st.shared) made visible to wgmma's reads.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// d += A B: A (64 x 16) and B (16 x 64) from shared memory, both K-major.
__device__ __forceinline__ void ss_n64(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b));
}

// d += A B: A (64 x 16) from registers, B (16 x 64) from shared memory, MN-major (transposed).
__device__ __forceinline__ void rs_n64_tb(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

}  // namespace wg
