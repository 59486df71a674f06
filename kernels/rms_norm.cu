// RMSNorm of token rows, one block per row: y = (h * rsqrtf(S / hidden + eps)) * w, rounded to bf16 (RN-even).
// h = x, or in the residual form RN32(x + r), also written to h_out as bf16; the fp32 h is what is normalised.
// S = sum h^2 in fp32: thread t adds the squares of its 8-element vectors t, t + T, t + 2T, ... in order (T the
// block's threads, a template argument; a row whose length is not a multiple of 8 goes element by element
// instead), then a xor butterfly in each warp, then warp 0 adds the warps' sums by the same butterfly. The order
// depends on the hidden size and T only, never on the number of rows, so a row's bits do not follow the batch.
// Each thread keeps its first H vectors of x, r and w (H a template argument, 4 by default) in registers from the
// sum to the scaling, so a row of up to 8 H T elements is read from memory once; the rest of a longer row is read
// again.
// Rounding points: the fp32 h (residual), each fma of the sum, S / hidden, + eps, rsqrtf, h * inv, * w, bf16.
#include <cuda_bf16.h>

namespace rn {

using bits16 = unsigned short;  // a bf16 value's bits

constexpr int kVec = 8;   // bf16 per 16-byte load

__device__ __forceinline__ float bf16_value(bits16 bits) { return __uint_as_float(static_cast<unsigned>(bits) << 16); }

__device__ __forceinline__ bits16 bf16_bits(float value) {  // RN-even
  return __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

// h of element i: x, or the fp32 sum x + r
template <bool kResidual>
__device__ __forceinline__ float h_at(const bits16* x, const bits16* r, size_t i) {
  float h = bf16_value(x[i]);
  if (kResidual) h = __fadd_rn(h, bf16_value(r[i]));
  return h;
}

// The block's sum of one value per thread: a xor butterfly per warp, then over the warps' sums in warp 0.
template <int T>
__device__ float block_sum(float v) {
  static_assert(T % 32 == 0 && T <= 1024, "whole warps, at most 32");
  __shared__ float warp_sums[T / 32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = T / 32;
  for (int step = 16; step > 0; step >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, step));
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? warp_sums[lane] : 0.0f;
    for (int step = 16; step > 0; step >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, step));
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

// The squares of one vector's h added to sum in element order; in the residual form h is also written to h_out.
template <bool kResidual>
__device__ __forceinline__ float add_squares(uint4 xv, uint4 rv, bits16* h_out, int v, float sum) {
  const bits16* xs = reinterpret_cast<const bits16*>(&xv);
  const bits16* rs = reinterpret_cast<const bits16*>(&rv);
  uint4 hv;
  bits16* hs = reinterpret_cast<bits16*>(&hv);
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    float h = bf16_value(xs[e]);
    if (kResidual) {
      h = __fadd_rn(h, bf16_value(rs[e]));
      hs[e] = bf16_bits(h);
    }
    sum = __fmaf_rn(h, h, sum);
  }
  if (kResidual) reinterpret_cast<uint4*>(h_out)[v] = hv;
  return sum;
}

// One vector of y: (h * inv) * w, each product fp32 RN, rounded to bf16.
template <bool kResidual>
__device__ __forceinline__ uint4 scaled(uint4 xv, uint4 rv, uint4 wv, float inv) {
  const bits16* xs = reinterpret_cast<const bits16*>(&xv);
  const bits16* rs = reinterpret_cast<const bits16*>(&rv);
  const bits16* ws = reinterpret_cast<const bits16*>(&wv);
  uint4 yv;
  bits16* ys = reinterpret_cast<bits16*>(&yv);
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    float h = bf16_value(xs[e]);
    if (kResidual) h = __fadd_rn(h, bf16_value(rs[e]));
    ys[e] = bf16_bits(__fmul_rn(__fmul_rn(h, inv), bf16_value(ws[e])));
  }
  return yv;
}

__device__ __forceinline__ uint4 vector_in(const bits16* row, int v) {  // through the read-only data cache
  return __ldg(reinterpret_cast<const uint4*>(row) + v);
}

template <bool kResidual, int T, int H>
__device__ void normalise_row(const bits16* __restrict__ x, const bits16* __restrict__ r,
                              const bits16* __restrict__ w, bits16* __restrict__ out,
                              bits16* __restrict__ h_out, int hidden, float eps) {
  const size_t base = size_t(blockIdx.x) * size_t(hidden);
  x += base;
  out += base;
  if (kResidual) {
    r += base;
    h_out += base;
  }
  const bool vectors = (hidden % kVec) == 0;  // rows then start 16-byte aligned
  const int count = hidden / kVec;
  uint4 xh[H], rh[H], wh[H];  // this thread's first H vectors, read once
  float sum = 0.0f;
  if (vectors) {
#pragma unroll
    for (int j = 0; j < H; ++j) {  // every held vector's loads in flight before the first square
      const int v = threadIdx.x + j * T;
      rh[j] = make_uint4(0, 0, 0, 0);
      if (v < count) {
        xh[j] = vector_in(x, v);
        if (kResidual) rh[j] = vector_in(r, v);
        wh[j] = vector_in(w, v);
      }
    }
#pragma unroll
    for (int j = 0; j < H; ++j) {
      const int v = threadIdx.x + j * T;
      if (v < count) sum = add_squares<kResidual>(xh[j], rh[j], h_out, v, sum);
    }
    for (int v = threadIdx.x + H * T; v < count; v += T)  // rows longer than H T vectors: the rest
      sum = add_squares<kResidual>(vector_in(x, v), kResidual ? vector_in(r, v) : make_uint4(0, 0, 0, 0), h_out,
                                   v, sum);
  } else {
    for (int i = threadIdx.x; i < hidden; i += T) {
      const float h = h_at<kResidual>(x, r, i);
      if (kResidual) h_out[i] = bf16_bits(h);
      sum = __fmaf_rn(h, h, sum);
    }
  }
  const float s = block_sum<T>(sum);
  const float inv = rsqrtf(__fadd_rn(__fdiv_rn(s, float(hidden)), eps));
  if (vectors) {
    uint4* y = reinterpret_cast<uint4*>(out);
#pragma unroll
    for (int j = 0; j < H; ++j) {
      const int v = threadIdx.x + j * T;
      if (v < count) y[v] = scaled<kResidual>(xh[j], rh[j], wh[j], inv);
    }
    for (int v = threadIdx.x + H * T; v < count; v += T)  // read again: from L2, just read
      y[v] = scaled<kResidual>(vector_in(x, v), kResidual ? vector_in(r, v) : make_uint4(0, 0, 0, 0),
                               vector_in(w, v), inv);
  } else {
    for (int i = threadIdx.x; i < hidden; i += T)
      out[i] = bf16_bits(__fmul_rn(__fmul_rn(h_at<kResidual>(x, r, i), inv), bf16_value(w[i])));
  }
}

}  // namespace rn

// T threads per row's block (the launch gives T), H vectors of the row per thread held in registers
template <int T, int H = 4>
__global__ void __launch_bounds__(T) rms_norm(const rn::bits16* __restrict__ x, const rn::bits16* __restrict__ w,
                                              rn::bits16* __restrict__ out, int hidden, float eps) {
  rn::normalise_row<false, T, H>(x, nullptr, w, out, nullptr, hidden, eps);
}

template <int T, int H = 4>
__global__ void __launch_bounds__(T) rms_norm_residual(const rn::bits16* __restrict__ x,
                                                       const rn::bits16* __restrict__ residual,
                                                       const rn::bits16* __restrict__ w, rn::bits16* __restrict__ out,
                                                       rn::bits16* __restrict__ h_out, int hidden, float eps) {
  rn::normalise_row<true, T, H>(x, residual, w, out, h_out, hidden, eps);
}
