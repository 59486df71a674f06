// Fused window-attention prompt on warpgroup tensor cores (sm_90a): window_prompt_attend takes 64 consecutive rows
// of one sequence and one query head, walks their keys in 64-key chunks at absolute positions and merges each
// chunk into the rows' running (M, L, O) in registers, so only the output and each row's largest score reach
// global memory. D = head dim (128, 256), G = query heads per key head (1..16), PB = 1 rounds p to bf16 before
// both sums (bf16 P), 0 keeps it fp32 (P32, as three exact bf16 parts). bf16 travels as uint16_t bit patterns.
//
// Launch geometry: grid (tiles, kv_heads * G), tiles = sum over sequences of ceil(rows / 64); D threads, one
// warpgroup per 128 output dims (at D = 256 both warpgroups form the same scores); wf::kSmemBytes<D> = (1 + 2 WF_STAGES) 128 D
// bytes of dynamic shared memory (the kernel traps on any other size). Off sm_90a the kernel traps.
//
// Shared memory: Q, then K and V of WF_STAGES chunks (the next ones land while this one is used), each a 64 x D bf16
// tile stored as D / 64 blocks of 64 rows x 128 bytes with the 128-byte swizzle (16-byte piece j of row r at
// piece j ^ (r % 8)): K-major for Q and K (rows are rows or keys), MN-major for V (rows are keys).
//
// The order, per row and chunk (sum_order window_prompt_wgmma, docs/kernel-contract.md 8):
//   s = RN(dot * scale), dot by wgmma k-steps over dims 16 s .. 16 s + 15 in order from 0; masked keys -inf;
//   m_c = max s (exact); p = expf(RN(s - m_c)), rounded to bf16 for bf16 P;
//   l_c: lane c4 of the row's quad adds keys 8 t + 2 c4 + e (t = 0..7, e = 0, 1) in order from 0, then the quad
//        butterfly (xor 1, then xor 2);
//   o_c: wgmma k-steps over keys 16 k .. 16 k + 15 from 0, per k-step p's parts hi, mid, lo in turn;
//   merge: M' = max(M, m_c), a = expf(RN(M - M')), b = expf(RN(m_c - M')), L = fma(l_c, b, RN(L a)),
//          O = fma(o_c, b, RN(O a)); a chunk the row does not see leaves (M, L, O) as they were;
//   out = bf16(RN(O / L)), row_m = M.

#include <cuda_bf16.h>
#include "tensor_core.cuh"
#include "wgmma.cuh"

// ---------------------------------------------------------------------------------------------------------------
// Fault hooks: the defaults are the kernel; a planted-fault control defines one before including this file.
// ---------------------------------------------------------------------------------------------------------------

// The last key a row at position pos reads, given row_last (its own position or its image span's end).
#ifndef WF_LAST_KEY
#define WF_LAST_KEY(pos, given) (given)
#endif

// The rescale of a running sum x by a = expf(RN(M - M')) when a chunk raises the row's maximum.
#ifndef WF_RESCALE
#define WF_RESCALE(x, a) __fmul_rn((x), (a))
#endif

// Chunks of K and V in shared memory at once: this one and STAGES - 1 landing behind it.
#ifndef WF_STAGES
#define WF_STAGES 2
#endif

// Descriptor byte offsets (leading, stride) of the K-major tiles (Q, K) and of the MN-major V tile.
#ifndef WF_K_LBO
#define WF_K_LBO 16
#endif
#ifndef WF_K_SBO
#define WF_K_SBO 1024
#endif
#ifndef WF_V_LBO
#define WF_V_LBO 1024
#endif
#ifndef WF_V_SBO
#define WF_V_SBO 1024
#endif

namespace wf {

constexpr int kTile = 64;   // rows per block: the wgmma's M
constexpr int kChunk = 64;  // keys per chunk, at absolute positions: the scores' N

template <int D>
constexpr int kTileBytes = kTile * D * 2;  // one swizzled 64 x D bf16 tile

constexpr int kStages = WF_STAGES;

template <int D>
constexpr int kSmemBytes = (1 + 2 * kStages) * kTileBytes<D>;  // Q, K[stages], V[stages]

template <int PB>
constexpr int kParts = PB ? 1 : 3;  // bf16 parts of p: fp32 p is exactly hi + mid + lo

// Byte offset of element (r, col) of a swizzled tile: block col / 64, row r, piece (col % 64 / 8) ^ (r % 8).
__device__ __forceinline__ int swizzled(int r, int col) {
  return (col / 64) * 8192 + r * 128 + ((((col % 64) / 8) ^ (r % 8)) * 16) + (col % 8) * 2;
}

using Tile = tc::RowBlock;
using tc::first_key;

// A thread's share of copying a 64 x D bf16 tile into swizzled shared memory: the 16-byte pieces at column
// col = 8 (tid % (D / 8)) of rows r0 + 8 n, n = 0..7, r0 = tid / (D / 8) (consecutive threads on consecutive
// pieces of a row); so piece n lands at at + 1024 n.
template <int D>
struct Share {
  int r0, col, at;
  __device__ __forceinline__ Share() : r0(threadIdx.x / (D / 8)), col(8 * (threadIdx.x % (D / 8))),
                                       at(swizzled(threadIdx.x / (D / 8), 8 * (threadIdx.x % (D / 8)))) {}
};

// RN of two floats to bf16 in one word, lo in the low half; and the halves back as floats (exact).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
__device__ __forceinline__ float low_half(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float high_half(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

}  // namespace wf

template <int D, int G, int PB>
__global__ void __launch_bounds__(D, 1)
window_prompt_attend(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k_cache,
                     const unsigned short* __restrict__ v_cache, const int* __restrict__ seq_row0,
                     const int* __restrict__ seq_pos0, const int* __restrict__ seq_slot,
                     const int* __restrict__ row_last, unsigned short* __restrict__ out, float* __restrict__ row_m,
                     int win, int ring, float scale, int kv_heads, int n_seq) {
  static_assert(D == 128 || D == 256, "head dim 128 or 256");
  static_assert(G >= 1 && G <= 16, "1 to 16 query heads per key head");
  static_assert(wf::kChunk == wf::kTile, "a chunk's keys are the scores' N = 64");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kParts = wf::kParts<PB>;
  constexpr int kSteps = D / 16;  // score k-steps per chunk
  extern __shared__ __align__(1024) unsigned char wf_smem[];
  unsigned dyn_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
  if (dyn_bytes != static_cast<unsigned>(wf::kSmemBytes<D>)) __trap();  // the launch must give the layout
  if (static_cast<unsigned>(__cvta_generic_to_shared(wf_smem)) % 1024) __trap();  // the swizzle's atoms align
  unsigned char* q_s = wf_smem;
  constexpr int kStages = wf::kStages;
  static_assert(kStages >= 2, "two stages at least: one used while the next lands");
  unsigned char* k_s = wf_smem + wf::kTileBytes<D>;                  // [stages] chunks
  unsigned char* v_s = wf_smem + (1 + kStages) * wf::kTileBytes<D>;  // [stages] chunks

  const int tid = threadIdx.x, group = tid / 128, warp = tid % 128 / 32, lane = tid % 32;
  const int gr = lane / 4, c4 = lane % 4;
  const int h = blockIdx.y, kh = h / G, hq = kv_heads * G;
  const wf::Tile tile = tc::find_rows<wf::kTile>(seq_row0, seq_pos0, n_seq, blockIdx.x);
  if (tile.rows == 0) return;  // block-uniform: a grid wider than the call's tiles

  // This thread's rows 16 warp + gr + 8 i: their visible keys [first, last] (none past the tile's rows).
  int first[2], last[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = 16 * warp + gr + 8 * i;
    const int pos = tile.pos0 + tile.row0 + r - tile.seq_row0;
    first[i] = r < tile.rows ? wf::first_key(pos, win) : 1;
    last[i] = r < tile.rows ? WF_LAST_KEY(pos, row_last[tile.row0 + r]) : 0;
  }
  int lo_key = 0x7fffffff, hi_key = -1;  // the tile's keys
  for (int r = 0; r < tile.rows; ++r) {
    const int pos = tile.pos0 + tile.row0 + r - tile.seq_row0;
    lo_key = min(lo_key, wf::first_key(pos, win));
    hi_key = max(hi_key, WF_LAST_KEY(pos, row_last[tile.row0 + r]));
  }
  const int c_lo = lo_key / wf::kChunk, c_hi = hi_key / wf::kChunk;
  const long long head_base = static_cast<long long>(seq_slot[tile.seq]) * ring * kv_heads * D +
                              static_cast<long long>(kh) * D;
  const long long row_elems = static_cast<long long>(kv_heads) * D;

  const wf::Share<D> share;
#pragma unroll
  for (int n = 0; n < 8; ++n) {  // Q; rows past the tile's are zeros
    const int r = share.r0 + 8 * n;
    const long long row = tile.row0 + (r < tile.rows ? r : 0);
    tc::cp_async16(q_s + share.at + 1024 * n, q + (row * hq + h) * D + share.col, r < tile.rows ? 16u : 0u);
  }
  auto load_chunk = [&](int c) {  // K and V of chunk c into its stage, a copy group each; keys off the tile's: zeros
    const int key0 = c * wf::kChunk, st = (c - c_lo) % kStages;
    const int ring0 = (key0 + share.r0) % ring;  // the cache row of this thread's first key
    const long long base = head_base + share.col;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      if (c <= c_hi) {
        const unsigned short* cache = kv ? v_cache : k_cache;
        unsigned char* dst = (kv ? v_s : k_s) + st * wf::kTileBytes<D> + share.at;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const int p = key0 + share.r0 + 8 * n;
          int row = ring0 + 8 * n;
          if (row >= ring) row %= ring;
          const bool on = p >= lo_key && p <= hi_key;
          tc::cp_async16(dst + 1024 * n, cache + base + (on ? row : 0) * row_elems, on ? 16u : 0u);
        }
      }
      tc::cp_async_commit();  // empty past the last chunk: the wait counts stay uniform
    }
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) load_chunk(c_lo + i);  // Q goes with the first chunk's K

  // Descriptors of each operand's first k-step; a later one adds its byte offset / 16 (the address field's unit).
  const unsigned long long q_desc = wg::smem_desc(q_s, WF_K_LBO, WF_K_SBO, 1);
  const unsigned long long k_desc = wg::smem_desc(k_s, WF_K_LBO, WF_K_SBO, 1);
  const unsigned long long v_desc = wg::smem_desc(v_s + group * 2 * 8192, WF_V_LBO, WF_V_SBO, 1);

  float big_m[2] = {tc::neg_inf(), tc::neg_inf()}, big_l[2] = {0.0f, 0.0f};
  float big_o[2][32];  // this warpgroup's 128 dims: blocks of 64 dims, each in the accumulator layout
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int j = 0; j < 32; ++j) big_o[b][j] = 0.0f;

  for (int c = c_lo; c <= c_hi; ++c) {
    const int st = (c - c_lo) % kStages;
    load_chunk(c + kStages - 1);  // into the stage chunk c - 1 used: every thread is past it
    tc::cp_async_wait<2 * kStages - 1>();  // this thread's copies of chunk c's K (and Q) have landed
    wg::fence_async_shared();
    __syncthreads();  // and every thread's

    // Scores of the tile's 64 rows against the chunk's 64 keys: k-steps over dims 16 s .. + 15 in order.
    float s[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) s[j] = 0.0f;
    wg::fence();
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const int at = (ks / 4) * 8192 + (ks % 4) * 32;
      wg::ss_n64(s, q_desc + (at >> 4), k_desc + ((st * wf::kTileBytes<D> + at) >> 4));
    }
    wg::commit();
    wg::wait0();

    // Mask and scale; each row's chunk maximum, p and l_c. s[4 t + 2 i + e]: row i, key 8 t + 2 c4 + e.
    const int key0 = c * wf::kChunk;
    float m[2], l[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      m[i] = tc::neg_inf();
      const bool whole = key0 >= first[i] && key0 + wf::kChunk - 1 <= last[i];  // the row sees every key
#pragma unroll
      for (int t = 0; t < 8; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key0 + 8 * t + 2 * c4 + e;
          float& x = s[4 * t + 2 * i + e];
          x = __fmul_rn(x, scale);  // rounding: RN(dot * scale)
          if (!whole && (key < first[i] || key > last[i])) x = tc::neg_inf();  // masked keys score -inf
          m[i] = fmaxf(m[i], x);  // exact
        }
      m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 1));  // exact: the row's quad
      m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 2));
      l[i] = 0.0f;
#pragma unroll
      for (int t = 0; t < 8; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * t + 2 * i + e];
          float p = expf(__fsub_rn(x, m[i]));  // rounding: RN(s - m_c), expf (0 for a masked key)
          if (PB) p = __bfloat162float(__float2bfloat16_rn(p));              // rounding: bf16 P rounds p
          l[i] = __fadd_rn(l[i], p);  // rounding: the lane's keys in order
          x = p;
        }
      l[i] = __fadd_rn(l[i], __shfl_xor_sync(0xffffffffu, l[i], 1));  // rounding: quad butterfly, xor 1
      l[i] = __fadd_rn(l[i], __shfl_xor_sync(0xffffffffu, l[i], 2));  // then xor 2
    }

    // p as A fragments of the four PV k-steps, each part: keys 16 k + 2 c4 (+ 1) and + 8 of rows gr, gr + 8.
    unsigned a[kParts][4][4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int j = 4 * (2 * k + f / 2) + 2 * (f % 2);  // s index of the pair (row f % 2, n-tile 2 k + f / 2)
        float x0 = s[j], x1 = s[j + 1];
#pragma unroll
        for (int part = 0; part < kParts; ++part) {  // each split is exact, and so is the last part
          const unsigned w = wf::pack_bf16(x0, x1);  // rounding: RN to bf16 (exact for bf16 P's p)
          a[part][k][f] = w;
          x0 = __fsub_rn(x0, wf::low_half(w));
          x1 = __fsub_rn(x1, wf::high_half(w));
        }
      }

    tc::cp_async_wait<2 * kStages - 2>();  // chunk c's V
    wg::fence_async_shared();
    __syncthreads();

    // o_c: the chunk's p times V, fresh from zero; k-steps over keys in order, per k-step the parts in turn.
    float o[2][32];
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int j = 0; j < 32; ++j) o[b][j] = 0.0f;
    wg::fence();
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int part = 0; part < kParts; ++part)
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          wg::rs_n64_tb(o[b], a[part][k], v_desc + ((st * wf::kTileBytes<D> + b * 8192 + k * 2048) >> 4));
        }
    wg::commit();
    wg::wait0();

    // The online merge, per row the chunk touches.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (m[i] == tc::neg_inf()) continue;  // the row sees none of the chunk's keys
      const float mx = fmaxf(big_m[i], m[i]);             // exact
      const float fa = expf(__fsub_rn(big_m[i], mx));     // rounding: RN(M - M'), expf (0 when M = -inf)
      const float fb = expf(__fsub_rn(m[i], mx));         // rounding: RN(m_c - M'), expf
      if (fa != 1.0f) {  // RN(x 1) = x: a maximum that stays leaves L and O unscaled, bit for bit
        big_l[i] = WF_RESCALE(big_l[i], fa);  // rounding: RN(L a)
#pragma unroll
        for (int b = 0; b < 2; ++b)
#pragma unroll
          for (int t = 0; t < 8; ++t)
#pragma unroll
            for (int e = 0; e < 2; ++e) big_o[b][4 * t + 2 * i + e] = WF_RESCALE(big_o[b][4 * t + 2 * i + e], fa);
      }
      big_l[i] = fmaf(l[i], fb, big_l[i]);  // rounding: one fma
#pragma unroll
      for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = 4 * t + 2 * i + e;
            big_o[b][j] = fmaf(o[b][j], fb, big_o[b][j]);  // rounding: one fma
          }
      big_m[i] = mx;
    }
    __syncthreads();  // every warpgroup is done with stage st: the next chunk's copies may go over it
  }
  tc::cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = 16 * warp + gr + 8 * i;
    if (r >= tile.rows) continue;
    const long long row = static_cast<long long>(tile.row0 + r) * hq + h;
    unsigned* dst = reinterpret_cast<unsigned*>(out + row * D + 128 * group + 2 * c4);
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const int j = 4 * t + 2 * i;
        const float y0 = __fdiv_rn(big_o[b][j], big_l[i]), y1 = __fdiv_rn(big_o[b][j + 1], big_l[i]);  // rounding: IEEE
        dst[(64 * b + 8 * t) / 2] = wf::pack_bf16(y0, y1);  // rounding: bf16
      }
    if (group == 0 && c4 == 0) row_m[row] = big_m[i];
  }
#else
  __trap();  // wgmma needs sm_90a
#endif
}
