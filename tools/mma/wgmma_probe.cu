// Probe kernels: the same k-step chains through wgmma (sm_90a) and mma.sync, and a wgmma throughput ceiling.
// Built here by NVRTC for sm_90a (wgmma_probe.py --build, -I kernels); loaded on the GPU from the cubin.
//
// A chain: one warpgroup per problem; A [steps][64][16], B [steps][8][16] (n rows, k contiguous), bf16 bits;
// C [64][8] fp32; D [steps][64][8] holds the accumulator after each step (D_s = C_s + A_s B_s^T, C_0 = C,
// C_s = D_{s-1}). Thread (warp w, lane gr * 4 + c4) holds rows 16 w + gr, + 8 and columns 2 c4, + 1 in both
// kernels; the A fragment is mma.sync's m16n8k16 one in both.

#include "tensor_core.cuh"
#include "wgmma.cuh"

namespace {

__device__ __forceinline__ unsigned pack2(const unsigned short* p) {
  return static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 16);
}

// A fragment of rows 16 w + gr (+ 8), k 2 c4 (+ 8) of one step's [64][16] A.
__device__ __forceinline__ void a_fragment(const unsigned short* a, int w, int gr, int c4, unsigned (&f)[4]) {
  const unsigned short* r0 = a + (16 * w + gr) * 16;
  const unsigned short* r1 = r0 + 8 * 16;
  f[0] = pack2(r0 + 2 * c4);
  f[1] = pack2(r1 + 2 * c4);
  f[2] = pack2(r0 + 2 * c4 + 8);
  f[3] = pack2(r1 + 2 * c4 + 8);
}

// This thread's four accumulator elements of n-tile t in a row-major 64 x n fp32 tile: rows 16 w + gr and + 8,
// columns 8 t + 2 c4 and + 1 (the mma.sync and wgmma accumulator layout).
__device__ __forceinline__ void load4(const float* m, int n, int t, int w, int gr, int c4, float* v) {
  const float* r0 = m + (16 * w + gr) * n + 8 * t + 2 * c4;
  v[0] = r0[0], v[1] = r0[1], v[2] = r0[8 * n], v[3] = r0[8 * n + 1];
}

__device__ __forceinline__ void store4(float* m, int n, int t, int w, int gr, int c4, const float* v) {
  float* r0 = m + (16 * w + gr) * n + 8 * t + 2 * c4;
  r0[0] = v[0], r0[1] = v[1], r0[8 * n] = v[2], r0[8 * n + 1] = v[3];
}

// Element index of (row, col) in a tile of 64-element (128-byte) rows with the 128-byte swizzle: 16-byte piece
// col / 8 of row r sits at piece (col / 8) ^ (r % 8).
__device__ __forceinline__ int sw128(int row, int col) { return row * 64 + (((col / 8) ^ (row % 8)) * 8) + col % 8; }

// d += A (registers, 64x16) * B (shared, 16x8 K-major): one wgmma k-step.
__device__ __forceinline__ void wgmma_m64n8k16(float (&d)[4], const unsigned (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128)
chain_wgmma(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b, const float* __restrict__ c,
            float* __restrict__ d, int steps) {
  __shared__ __align__(128) unsigned short b_s[2][8][8];  // core matrices k 0-7 and k 8-15, rows n 0-7
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, c4 = lane % 4;
  const long long prob = blockIdx.x;
  float acc[4];
  load4(c + prob * 64 * 8, 8, 0, w, gr, c4, acc);
  for (int s = 0; s < steps; ++s) {
    const unsigned short* as = a + (prob * steps + s) * 64 * 16;
    const unsigned short* bs = b + (prob * steps + s) * 8 * 16;
    __syncthreads();  // the previous step's wgmma has read b_s
    {
      const int n = threadIdx.x / 16, k = threadIdx.x % 16;  // 128 threads: one element each
      b_s[k / 8][n][k % 8] = bs[n * 16 + k];
    }
    wg::fence_async_shared();
    __syncthreads();
    unsigned f[4];
    a_fragment(as, w, gr, c4, f);
    // both offsets 128 bytes: with N = 8 the stride offset is unused, whichever of the two walks k
    const unsigned long long desc = wg::smem_desc(&b_s[0][0][0], 128, 128, 0);
    wg::fence();
    wgmma_m64n8k16(acc, f, desc);
    wg::commit();
    wg::wait0();
    store4(d + (prob * steps + s) * 64 * 8, 8, 0, w, gr, c4, acc);
  }
}

extern "C" __global__ void __launch_bounds__(128)
chain_mma_sync(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
               const float* __restrict__ c, float* __restrict__ d, int steps) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, c4 = lane % 4;
  const long long prob = blockIdx.x;
  float acc[4];
  load4(c + prob * 64 * 8, 8, 0, w, gr, c4, acc);
  for (int s = 0; s < steps; ++s) {
    const unsigned short* as = a + (prob * steps + s) * 64 * 16;
    const unsigned short* bs = b + (prob * steps + s) * 8 * 16;
    unsigned f[4];
    a_fragment(as, w, gr, c4, f);
    tc::mma_bf16(acc, f[0], f[1], f[2], f[3], pack2(bs + gr * 16 + 2 * c4), pack2(bs + gr * 16 + 2 * c4 + 8));
    store4(d + (prob * steps + s) * 64 * 8, 8, 0, w, gr, c4, acc);
  }
}

// Throughput: each warpgroup runs `iters` groups of 8 chained m64n256k16 k-steps (A and B from shared memory,
// 128 fp32 accumulators per thread); out gets one sum per thread so that nothing is dead code.
extern "C" __global__ void __launch_bounds__(128)
ceiling_wgmma(const unsigned short* __restrict__ src, float* __restrict__ out, int iters) {
  __shared__ __align__(1024) unsigned short a_s[64 * 16];
  __shared__ __align__(1024) unsigned short b_s[256 * 16];
  for (int i = threadIdx.x; i < 64 * 16; i += 128) a_s[i] = src[i];
  for (int i = threadIdx.x; i < 256 * 16; i += 128) b_s[i] = src[64 * 16 + i];
  wg::fence_async_shared();
  __syncthreads();
  const unsigned long long da = wg::smem_desc(a_s, 128, 256, 0), db = wg::smem_desc(b_s, 128, 256, 0);
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    wg::fence();
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
          "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
          "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
          "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
          "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
          "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
          "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
          "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
          "%128, %129, p, 1, 1, 0, 0;\n}\n"
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]),
            "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]),
            "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]),
            "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]),
            "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]),
            "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]),
            "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]),
            "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]), "+f"(acc[49]),
            "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]),
            "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]), "+f"(acc[61]),
            "+f"(acc[62]), "+f"(acc[63]), "+f"(acc[64]), "+f"(acc[65]), "+f"(acc[66]), "+f"(acc[67]),
            "+f"(acc[68]), "+f"(acc[69]), "+f"(acc[70]), "+f"(acc[71]), "+f"(acc[72]), "+f"(acc[73]),
            "+f"(acc[74]), "+f"(acc[75]), "+f"(acc[76]), "+f"(acc[77]), "+f"(acc[78]), "+f"(acc[79]),
            "+f"(acc[80]), "+f"(acc[81]), "+f"(acc[82]), "+f"(acc[83]), "+f"(acc[84]), "+f"(acc[85]),
            "+f"(acc[86]), "+f"(acc[87]), "+f"(acc[88]), "+f"(acc[89]), "+f"(acc[90]), "+f"(acc[91]),
            "+f"(acc[92]), "+f"(acc[93]), "+f"(acc[94]), "+f"(acc[95]), "+f"(acc[96]), "+f"(acc[97]),
            "+f"(acc[98]), "+f"(acc[99]), "+f"(acc[100]), "+f"(acc[101]), "+f"(acc[102]), "+f"(acc[103]),
            "+f"(acc[104]), "+f"(acc[105]), "+f"(acc[106]), "+f"(acc[107]), "+f"(acc[108]), "+f"(acc[109]),
            "+f"(acc[110]), "+f"(acc[111]), "+f"(acc[112]), "+f"(acc[113]), "+f"(acc[114]), "+f"(acc[115]),
            "+f"(acc[116]), "+f"(acc[117]), "+f"(acc[118]), "+f"(acc[119]), "+f"(acc[120]), "+f"(acc[121]),
            "+f"(acc[122]), "+f"(acc[123]), "+f"(acc[124]), "+f"(acc[125]), "+f"(acc[126]), "+f"(acc[127])
          : "l"(da), "l"(db));
    }
    wg::commit();
    wg::wait0();
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 128; ++i) s += acc[i];
  out[blockIdx.x * 128 + threadIdx.x] = s;
}

// Chains through m64n64k16 in a prompt kernel's layouts: form 0 takes A and B from shared memory, both K-major
// with the 128-byte swizzle (Q K^T: the tile 64 x 64, k-step s at +32 s bytes); form 1 takes A from registers and
// B MN-major with the 128-byte swizzle, transposed (p V: rows are keys, k-step s at +2048 s bytes). A [steps][64]
// [16], B [steps][64][16] as (n, k), C [64][64], D [steps][64][64]; steps <= 4; lbo, sbo, mode: the descriptors.
extern "C" __global__ void __launch_bounds__(128)
tile_wgmma_n64(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
               const float* __restrict__ c, float* __restrict__ d, int steps, int form, int lbo, int sbo, int mode) {
  __shared__ __align__(1024) unsigned short a_s[64 * 64];
  __shared__ __align__(1024) unsigned short b_s[64 * 64];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, c4 = lane % 4;
  const long long prob = blockIdx.x;
  for (int i = threadIdx.x; i < steps * 64 * 16; i += 128) {
    const int s = i / 1024, r = i / 16 % 64, k = 16 * s + i % 16;
    a_s[sw128(r, k)] = a[prob * steps * 1024 + i];
    const unsigned short v = b[prob * steps * 1024 + i];  // (n = r, k)
    b_s[form == 0 ? sw128(r, k) : sw128(k, r)] = v;
  }
  wg::fence_async_shared();
  __syncthreads();
  float acc[32];
#pragma unroll
  for (int t = 0; t < 8; ++t) load4(c + prob * 64 * 64, 64, t, w, gr, c4, acc + 4 * t);
  for (int s = 0; s < steps; ++s) {
    wg::fence();
    if (form == 0) {
      wg::ss_n64(acc, wg::smem_desc(reinterpret_cast<const char*>(a_s) + 32 * s, lbo, sbo, mode),
                   wg::smem_desc(reinterpret_cast<const char*>(b_s) + 32 * s, lbo, sbo, mode));
    } else {
      unsigned f[4];
      a_fragment(a + (prob * steps + s) * 64 * 16, w, gr, c4, f);
      wg::rs_n64_tb(acc, f, wg::smem_desc(reinterpret_cast<const char*>(b_s) + 2048 * s, lbo, sbo, mode));
    }
    wg::commit();
    wg::wait0();
#pragma unroll
    for (int t = 0; t < 8; ++t) store4(d + (prob * steps + s) * 64 * 64, 64, t, w, gr, c4, acc + 4 * t);
  }
}

// The same chains through mma.sync m16n8k16, eight n-tiles per step.
extern "C" __global__ void __launch_bounds__(128)
tile_mma_sync_n64(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                  const float* __restrict__ c, float* __restrict__ d, int steps) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, c4 = lane % 4;
  const long long prob = blockIdx.x;
  float acc[8][4];
  for (int t = 0; t < 8; ++t) load4(c + prob * 64 * 64, 64, t, w, gr, c4, acc[t]);
  for (int s = 0; s < steps; ++s) {
    unsigned f[4];
    a_fragment(a + (prob * steps + s) * 64 * 16, w, gr, c4, f);
    const unsigned short* bs = b + (prob * steps + s) * 64 * 16;
    for (int t = 0; t < 8; ++t) {
      const unsigned short* br = bs + (8 * t + gr) * 16;
      tc::mma_bf16(acc[t], f[0], f[1], f[2], f[3], pack2(br + 2 * c4), pack2(br + 2 * c4 + 8));
      store4(d + (prob * steps + s) * 64 * 64, 64, t, w, gr, c4, acc[t]);
    }
  }
}
