// Warpgroup tensor-core helpers (sm_90a): shared-memory matrix descriptors, the wgmma fences, stmatrix, and the
// bf16 forms the prompt and matmul kernels use: A B^T with both operands in shared memory (K-major; N = 8, 16,
// 32, 64, 128, 192 or 256), and p V with p in registers (the mma.sync m16n8k16 A fragment per warp) or in shared memory
// (K-major) and V in shared memory (MN-major, transposed). All accumulate into fp32 d[N / 2]: thread (warp w of
// the warpgroup, lane 4 gr + c4) holds rows 16 w + gr and + 8, columns 8 t + 2 c4 and + 1 of n-tile t as
// d[4 t .. 4 t + 3] (row gr: + 0, + 1; row gr + 8: + 2, + 3).
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
// Wait until at most N of this warpgroup's committed groups are pending (groups complete in order).
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void wait0() { wait<0>(); }

// Generic-proxy writes to shared memory (cp.async, st.shared, stmatrix) made visible to wgmma's reads.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Four 8 x 8 bf16 matrices to shared memory: r[i] holds matrix i's elements in the mma fragment layout (lane t:
// row t / 4, columns 2 (t % 4), + 1); lane t gives the address of row t % 8 of matrix t / 8.
__device__ __forceinline__ void stmatrix_x4(void* row, const unsigned (&r)[4]) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               : : "r"(a), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}

// The accumulator operands and their PTX register lists: 4 to 128 fp32 registers.
#define WG_ACC4(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define WG_ACC8(d, o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), \
                      "+f"(d[o + 6]), "+f"(d[o + 7])
#define WG_ACC16(d) WG_ACC8(d, 0), WG_ACC8(d, 8)
#define WG_ACC32(d) WG_ACC16(d), WG_ACC8(d, 16), WG_ACC8(d, 24)
#define WG_ACC32_AT(d, o) WG_ACC8(d, o), WG_ACC8(d, o + 8), WG_ACC8(d, o + 16), WG_ACC8(d, o + 24)
#define WG_ACC64(d) WG_ACC32(d), WG_ACC32_AT(d, 32)
#define WG_ACC96(d) WG_ACC64(d), WG_ACC32_AT(d, 64)
#define WG_ACC128(d) WG_ACC96(d), WG_ACC32_AT(d, 96)
#define WG_REGS4 "{%0, %1, %2, %3}"
#define WG_REGS8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define WG_REGS16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define WG_REGS32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
                  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_REGS64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_REGS96 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, " \
  "%68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, " \
  "%90, %91, %92, %93, %94, %95}"
#define WG_REGS128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, " \
  "%68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, " \
  "%90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, " \
  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WG_MMA(shape, add) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #add ", 0;\nwgmma.mma_async.sync.aligned." shape \
                          ".f32.bf16.bf16 "

// Add = false starts the accumulator afresh (d = A B, its old values unread), else d += A B.

// d += A B: A (64 x 16) and B (16 x 8) from shared memory, both K-major.
template <bool Add = true>
__device__ __forceinline__ void ss_n8(float (&d)[4], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n8k16", 6) WG_REGS4 ", %4, %5, p, 1, 1, 0, 0;\n}\n"
               : WG_ACC4(d) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) and B (16 x 16) from shared memory, both K-major.
template <bool Add = true>
__device__ __forceinline__ void ss_n16(float (&d)[8], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n16k16", 10) WG_REGS8 ", %8, %9, p, 1, 1, 0, 0;\n}\n"
               : WG_ACC8(d, 0) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) and B (16 x 32) from shared memory, both K-major.
template <bool Add = true>
__device__ __forceinline__ void ss_n32(float (&d)[16], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n32k16", 18) WG_REGS16 ", %16, %17, p, 1, 1, 0, 0;\n}\n"
               : WG_ACC16(d) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) and B (16 x 64) from shared memory, both K-major.
template <bool Add = true>
__device__ __forceinline__ void ss_n64(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n64k16", 34) WG_REGS32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : WG_ACC32(d) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) and B (16 x 128) from shared memory, both K-major.
template <bool Add = true>
__device__ __forceinline__ void ss_n128(float (&d)[64], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n128k16", 66) WG_REGS64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : WG_ACC64(d) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) and B (16 x 192) from shared memory, both K-major.
template <bool Add = true>
__device__ __forceinline__ void ss_n192(float (&d)[96], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n192k16", 98) WG_REGS96 ", %96, %97, p, 1, 1, 0, 0;\n}\n"
               : WG_ACC96(d) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) and B (16 x 256) from shared memory, both K-major.
template <bool Add = true>
__device__ __forceinline__ void ss_n256(float (&d)[128], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n256k16", 130) WG_REGS128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
               : WG_ACC128(d) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) from shared memory, K-major; B (16 x 64) from shared memory, MN-major (transposed).
template <bool Add = true>
__device__ __forceinline__ void ss_n64_tb(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile(WG_MMA("m64n64k16", 34) WG_REGS32 ", %32, %33, p, 1, 1, 0, 1;\n}\n"
               : WG_ACC32(d) : "l"(a), "l"(b), "n"(Add ? 1 : 0));
}

// d += A B: A (64 x 16) from registers, B (16 x 64) from shared memory, MN-major (transposed).
template <bool Add = true>
__device__ __forceinline__ void rs_n64_tb(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
  asm volatile(WG_MMA("m64n64k16", 37) WG_REGS32 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : WG_ACC32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(Add ? 1 : 0));
}

#undef WG_MMA
#undef WG_REGS128
#undef WG_REGS96
#undef WG_REGS64
#undef WG_REGS32
#undef WG_REGS16
#undef WG_REGS8
#undef WG_REGS4
#undef WG_ACC128
#undef WG_ACC96
#undef WG_ACC64
#undef WG_ACC32_AT
#undef WG_ACC32
#undef WG_ACC16
#undef WG_ACC8
#undef WG_ACC4

}  // namespace wg
