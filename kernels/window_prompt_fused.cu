// Fused window-attention prompt on warpgroup tensor cores (sm_90a): window_prompt_attend takes 64 / G consecutive
// rows of one sequence with the G query heads of one key head (64 rows of the wgmma, each K and V chunk read once
// for all G heads), walks their keys in 64-key chunks at absolute positions and merges each chunk into the rows'
// running (M, L, O) in registers, so only the output and each row's largest score reach global memory. D = head
// dim (128, 256, 512), G = query heads per key head (1..16), PB = 1 rounds p to bf16 before both sums (bf16 P),
// 0 keeps it fp32 (P32, as three exact bf16 parts). bf16 travels as uint16_t bit patterns.
//
// Launch geometry: grid (tiles, kv_heads), tiles = sum over sequences of ceil(rows / (64 / G)) (64 / G rounded
// down; wgmma row m holds row m % (64 / G) of query head m / (64 / G), rows from G 64 / G on idle); 256 threads, two
// warpgroups: warpgroup g scores the chunk's keys 32 g .. 32 g + 31 and owns output dims g D / 2 .. (g + 1) D / 2;
// wf::kSmemBytes<D, PB> bytes of dynamic shared memory (the kernel traps on any other size). Off sm_90a it traps.
//
// Shared memory: Q, then K and V of wf::kStages<D> chunks, each a 64 x D bf16 tile stored as D / 64 blocks of 64
// rows x 128 bytes with the 128-byte swizzle (16-byte piece j of row r at piece j ^ (r % 8)): K-major for Q and K
// (rows are rows or keys), MN-major for V (rows are keys); then p's bf16 parts (64 rows x 64 keys each, K-major,
// swizzled) and the two warpgroups' exchange of chunk maxima and partial sums.
//
// The order, per row and chunk (sum_order window_prompt_wgmma, docs/kernel-contract.md 8.1):
//   s = RN(dot * scale), dot by wgmma k-steps over dims 16 s .. 16 s + 15 in order from 0; masked keys -inf;
//   m_c = max s (exact); p = expf(RN(s - m_c)), rounded to bf16 for bf16 P;
//   l_c: lane c4 of the row's quad adds keys 8 t + 2 c4 + e (t = 0..7, e = 0, 1) in order from 0 (warpgroup 0 adds
//        t = 0..3 and hands its sum to warpgroup 1, which adds t = 4..7), then the quad butterfly (xor 1, then 2);
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

// Descriptor byte offsets (leading, stride) of the K-major tiles (Q, K, p) and of the MN-major V tile.
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

constexpr int kTile = 64;      // wgmma rows per block: the wgmma's M
constexpr int kChunk = 64;     // keys per chunk, at absolute positions
constexpr int kThreads = 256;  // two warpgroups
constexpr int kHalf = 32;      // keys a warpgroup scores: the scores' N

// A tile's rows of one sequence: each with the G query heads of one key head, G kRows<G> wgmma rows in all.
template <int G>
constexpr int kRows = kTile / G;

// Whether wgmma row m holds one of the tile's `rows` rows (row m % kRows<G>, query head m / kRows<G> of G).
template <int G>
__device__ __forceinline__ bool holds_row(int m, int rows) { return m / kRows<G> < G && m % kRows<G> < rows; }

template <int D>
constexpr int kTileBytes = kTile * D * 2;  // one swizzled 64 x D bf16 tile

// Chunks of K and V in shared memory at once: two where they fit beside Q and p, else one.
template <int D>
constexpr int kStages = D == 512 ? 1 : 2;

template <int PB>
constexpr int kParts = PB ? 1 : 3;  // bf16 parts of p: fp32 p is exactly hi + mid + lo

constexpr int kPartBytes = kTile * kChunk * 2;  // one part of p, 64 rows x 64 keys
constexpr int kExchangeBytes = 3 * 128 * 8;     // both warpgroups' chunk maxima, warpgroup 0's partial l_c

// The overlapped schedule (chunk c's p V and chunk c + 1's scores on the tensor cores while the warps merge chunk c
// and form chunk c + 1's p) where two K/V stages, two p buffers and the registers fit; else one phase at a time.
template <int D>
constexpr bool kOverlap = D == 256;

template <int D>
constexpr int kPBuffers = kOverlap<D> ? 2 : 1;

template <int D, int PB>
constexpr int kSmemBytes =
    (1 + 2 * kStages<D>) * kTileBytes<D> + kPBuffers<D> * kParts<PB> * kPartBytes + kExchangeBytes;


template <int D>
constexpr int kMinBlocks = D == 128 ? 2 : 1;  // two blocks per SM where registers and shared memory allow

// Byte offset of element (r, col) of a swizzled tile: block col / 64, row r, piece (col % 64 / 8) ^ (r % 8).
__device__ __forceinline__ int swizzled(int r, int col) {
  return (col / 64) * 8192 + r * 128 + ((((col % 64) / 8) ^ (r % 8)) * 16) + (col % 8) * 2;
}

// Byte offset of score k-step ks (dims 16 ks .. + 15) in a K-major swizzled tile.
__device__ __forceinline__ int kstep_bytes(int ks) { return (ks / 4) * 8192 + (ks % 4) * 32; }

using Tile = tc::RowBlock;
using tc::first_key;

// A thread's share of copying a 64 x D bf16 tile into swizzled shared memory: the 16-byte pieces at column
// col = 8 (tid % (D / 8)) of rows r0 + kStep n (consecutive threads on consecutive pieces of a row).
template <int D>
struct Share {
  static constexpr int kStep = kThreads * 8 / D;  // rows between a thread's pieces
  static constexpr int kPieces = kTile / kStep;
  static_assert(kStep % 8 == 0 || kStep == 4, "a piece's swizzle repeats every one or two pieces");
  int r0, col, at[2];
  __device__ __forceinline__ Share() : r0(threadIdx.x / (D / 8)), col(8 * (threadIdx.x % (D / 8))) {
    at[0] = swizzled(r0, col);
    at[1] = swizzled(r0 + kStep % 8, col) - (kStep % 8) * 128;  // odd pieces where kStep is 4
  }
  __device__ __forceinline__ int offset(int n) const { return at[kStep % 8 ? n % 2 : 0] + n * kStep * 128; }
};

// This thread's pieces of the cache rows of keys key0 .. key0 + 63 (at slot key % ring) into a swizzled tile;
// keys outside [lo_key, hi_key] are zeros and read nothing. One copy group is the caller's.
template <int D>
__device__ __forceinline__ void load_keys(unsigned char* dst, const unsigned short* src, long long row_elems,
                                          int key0, int lo_key, int hi_key, int ring, const Share<D>& sh) {
  const int kr = key0 % ring;  // the cache row of the chunk's first key
  if (key0 >= lo_key && key0 + kChunk - 1 <= hi_key && kr + kChunk <= ring) {  // block-uniform: every key, no wrap
    const unsigned short* from = src + static_cast<long long>(kr + sh.r0) * row_elems;
#pragma unroll
    for (int n = 0; n < Share<D>::kPieces; ++n)
      tc::cp_async16(dst + sh.offset(n), from + n * Share<D>::kStep * row_elems, 16u);
    return;
  }
#pragma unroll
  for (int n = 0; n < Share<D>::kPieces; ++n) {
    const int key = key0 + sh.r0 + n * Share<D>::kStep;
    int row = kr + sh.r0 + n * Share<D>::kStep;
    while (row >= ring) row -= ring;
    const bool on = key >= lo_key && key <= hi_key;
    tc::cp_async16(dst + sh.offset(n), src + (on ? row : 0) * row_elems, on ? 16u : 0u);
  }
}

// RN of two floats to bf16 in one word, lo in the low half; and the halves back as floats (exact).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
__device__ __forceinline__ float low_half(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float high_half(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

}  // namespace wf

template <int D, int G, int PB>
__global__ void __launch_bounds__(wf::kThreads, wf::kMinBlocks<D>)
window_prompt_attend(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k_cache,
                     const unsigned short* __restrict__ v_cache, const int* __restrict__ seq_row0,
                     const int* __restrict__ seq_pos0, const int* __restrict__ seq_slot,
                     const int* __restrict__ row_last, unsigned short* __restrict__ out, float* __restrict__ row_m,
                     int win, int ring, float scale, int kv_heads, int n_seq) {
  static_assert(D == 128 || D == 256 || D == 512, "head dim 128, 256 or 512");
  static_assert(G >= 1 && G <= 16, "1 to 16 query heads per key head");
  static_assert(wf::kChunk == 2 * wf::kHalf, "each warpgroup scores half a chunk");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kParts = wf::kParts<PB>;
  constexpr int kStages = wf::kStages<D>;
  constexpr int kSteps = D / 16;                           // score k-steps per chunk
  constexpr int kBlocks = D / 128;                         // 64-dim output blocks a warpgroup owns
  constexpr int kPassBlocks = kBlocks < 2 ? kBlocks : 2;   // o_c of at most 128 dims in registers at once
  constexpr int kTileBytes = wf::kTileBytes<D>;
  constexpr bool kOverlap = wf::kOverlap<D>;
  extern __shared__ __align__(1024) unsigned char wf_smem[];
  unsigned dyn_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
  if (dyn_bytes != static_cast<unsigned>(wf::kSmemBytes<D, PB>)) __trap();  // the launch must give the layout
  if (static_cast<unsigned>(__cvta_generic_to_shared(wf_smem)) % 1024) __trap();  // the swizzle's atoms align
  unsigned char* q_s = wf_smem;
  unsigned char* k_s = q_s + kTileBytes;                // [stages] chunks
  unsigned char* v_s = k_s + kStages * kTileBytes;      // [stages] chunks
  unsigned char* p_s = v_s + kStages * kTileBytes;      // [buffers][parts] 64 x 64 tiles
  float2* x_max = reinterpret_cast<float2*>(p_s + wf::kPBuffers<D> * kParts * wf::kPartBytes);  // [group][128]
  float2* x_sum = x_max + 2 * 128;                                            // [128]

  const int tid = threadIdx.x, t128 = tid % 128, warp = t128 / 32, lane = tid % 32;
  const int group = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform, and known so: descriptors stay uniform
  const int gr = lane / 4, c4 = lane % 4;
  constexpr int kRows = wf::kRows<G>;
  const int kh = blockIdx.y, hq = kv_heads * G;
  const wf::Tile tile = tc::find_rows<kRows>(seq_row0, seq_pos0, n_seq, blockIdx.x);
  if (tile.rows == 0) return;  // block-uniform: a grid wider than the call's tiles

  // This thread's wgmma rows 16 warp + gr + 8 i: their visible keys [first, last] (none for an idle one).
  int first[2], last[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int m = 16 * warp + gr + 8 * i, r = m % kRows;
    const bool used = wf::holds_row<G>(m, tile.rows);
    const int pos = tile.pos0 + tile.row0 + r - tile.seq_row0;
    first[i] = used ? wf::first_key(pos, win) : 1;
    last[i] = used ? WF_LAST_KEY(pos, row_last[tile.row0 + r]) : 0;
  }
  int lo_key = 0x7fffffff, hi_key = -1;  // the tile's keys
  int all_first = -1, all_last = 0x7fffffff;  // keys every row of the tile sees: [all_first, all_last]
  for (int r = 0; r < tile.rows; ++r) {
    const int pos = tile.pos0 + tile.row0 + r - tile.seq_row0;
    const int f = wf::first_key(pos, win), l = WF_LAST_KEY(pos, row_last[tile.row0 + r]);
    lo_key = min(lo_key, f);
    hi_key = max(hi_key, l);
    all_first = max(all_first, f);
    all_last = min(all_last, l);
  }
  lo_key = __shfl_sync(0xffffffffu, lo_key, 0);  // the same in every thread: made known as uniform
  hi_key = __shfl_sync(0xffffffffu, hi_key, 0);
  all_first = __shfl_sync(0xffffffffu, all_first, 0);
  all_last = __shfl_sync(0xffffffffu, all_last, 0);
  const int c_lo = lo_key / wf::kChunk, c_hi = hi_key / wf::kChunk;
  const long long row_elems = static_cast<long long>(kv_heads) * D;
  const wf::Share<D> share;
  const long long head_at = static_cast<long long>(seq_slot[tile.seq]) * ring * row_elems +
                            static_cast<long long>(kh) * D + share.col;

#pragma unroll
  for (int n = 0; n < wf::Share<D>::kPieces; ++n) {  // Q; idle wgmma rows are zeros
    const int m = share.r0 + n * wf::Share<D>::kStep;
    const bool used = wf::holds_row<G>(m, tile.rows);
    const long long row = tile.row0 + (used ? m % kRows : 0);
    const int head = kh * G + (used ? m / kRows : 0);
    tc::cp_async16(q_s + share.offset(n), q + (row * hq + head) * D + share.col, used ? 16u : 0u);
  }
  // K or V of chunk c into its stage, one copy group (empty past the last chunk: the wait counts stay uniform).
  auto load = [&](bool value, int c) {
    if (c <= c_hi) {
      unsigned char* dst = (value ? v_s : k_s) + ((c - c_lo) % kStages) * kTileBytes;
      wf::load_keys<D>(dst, (value ? v_cache : k_cache) + head_at, row_elems, c * wf::kChunk, lo_key, hi_key, ring,
                       share);
    }
    tc::cp_async_commit();
  };

  // Descriptors of each operand's first k-step; a later one adds its byte offset / 16 (the address field's unit).
  const unsigned long long q_desc = wg::smem_desc(q_s, WF_K_LBO, WF_K_SBO, 1);
  const unsigned long long k_desc = wg::smem_desc(k_s + group * wf::kHalf * 128, WF_K_LBO, WF_K_SBO, 1);
  const unsigned long long v_desc = wg::smem_desc(v_s + group * kBlocks * 8192, WF_V_LBO, WF_V_SBO, 1);
  const unsigned long long p_desc = wg::smem_desc(p_s, WF_K_LBO, WF_K_SBO, 1);

  float big_m[2] = {tc::neg_inf(), tc::neg_inf()}, big_l[2] = {0.0f, 0.0f};  // L: warpgroup 1's
  float big_o[kBlocks][32];  // this warpgroup's D / 2 dims: blocks of 64 dims, each in the accumulator layout
#pragma unroll
  for (int b = 0; b < kBlocks; ++b)
#pragma unroll
    for (int j = 0; j < 32; ++j) big_o[b][j] = 0.0f;

  // ---- The phases of a chunk; the schedules below differ only in where they wait. ----

  // Issues the scores of the tile's 64 rows against this warpgroup's 32 keys of the chunk in K stage st: k-steps
  // over dims 16 s .. + 15 in order, one wgmma group.
  auto issue_scores = [&](float (&s)[16], int st) {
#pragma unroll
    for (int j = 0; j < 16; ++j) s[j] = 0.0f;
    wg::fence();
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks)
      wg::ss_n32(s, q_desc + (wf::kstep_bytes(ks) >> 4), k_desc + ((st * kTileBytes + wf::kstep_bytes(ks)) >> 4));
    wg::commit();
  };

  // Scales and masks chunk c's scores; each row's maximum over this warpgroup's keys into m and the exchange.
  // s[4 t + 2 i + e]: row i, key 8 t + 2 c4 + e of the warpgroup's 32.
  auto half_max = [&](float (&s)[16], int c, float (&m)[2]) {
    const int key0 = c * wf::kChunk + group * wf::kHalf;
#pragma unroll
    for (int j = 0; j < 16; ++j) s[j] = __fmul_rn(s[j], scale);  // rounding: RN(dot * scale)
    if (key0 < all_first || key0 + wf::kHalf - 1 > all_last) {  // warp-uniform: some row misses some key
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key0 + 8 * t + 2 * c4 + e;
            if (key < first[i] || key > last[i]) s[4 * t + 2 * i + e] = tc::neg_inf();  // masked keys score -inf
          }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      m[i] = tc::neg_inf();
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) m[i] = fmaxf(m[i], s[4 * t + 2 * i + e]);  // exact
      m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 1));  // exact: the row's quad
      m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 2));
    }
    x_max[group * 128 + t128] = make_float2(m[0], m[1]);
  };

  // Once both halves' maxima are exchanged: m becomes the chunk's m_c, s becomes p, warpgroup 0 starts each row's
  // l_c over its keys (t = 0..3 of the chunk's eight n-tiles) and hands it over, and p's parts go to shared memory.
  auto probabilities = [&](float (&s)[16], float (&m)[2], float (&l)[2], int buf) {
    const float2 other = x_max[(1 - group) * 128 + t128];
    m[0] = fmaxf(m[0], other.x);  // exact: the chunk's maximum m_c
    m[1] = fmaxf(m[1], other.y);
    l[0] = l[1] = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * t + 2 * i + e];
          float p = expf(__fsub_rn(x, m[i]));  // rounding: RN(s - m_c), expf (0 for a masked key)
          if (PB) p = __bfloat162float(__float2bfloat16_rn(p));  // rounding: bf16 P rounds p
          if (group == 0) l[i] = __fadd_rn(l[i], p);  // rounding: the lane's keys in order
          x = p;
        }
    if (group == 0) x_sum[t128] = make_float2(l[0], l[1]);
    // Matrix (row half i, n-tile t) of this warp's 16 rows goes to key piece 4 g + t of each part, K-major.
    float x[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) x[j] = s[j];
    const int mat = lane / 8, rr = lane % 8;  // this lane's row address: row rr of matrix mat
    const int row = 16 * warp + 8 * (mat % 2) + rr;
#pragma unroll
    for (int part = 0; part < kParts; ++part)
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // n-tiles 2 half, 2 half + 1
        unsigned w[4];
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          const int j = 4 * (2 * half + f / 2) + 2 * (f % 2);  // s index of the pair (row f % 2, n-tile)
          w[f] = wf::pack_bf16(x[j], x[j + 1]);  // rounding: RN to bf16 (exact for bf16 P's p); each split exact
          x[j] = __fsub_rn(x[j], wf::low_half(w[f]));
          x[j + 1] = __fsub_rn(x[j + 1], wf::high_half(w[f]));
        }
        const int piece = 4 * group + 2 * half + mat / 2;
        wg::stmatrix_x4(p_s + (buf * kParts + part) * wf::kPartBytes + row * 128 + ((piece ^ rr) * 16), w);
      }
  };

  // Once warpgroup 0's half is handed over: warpgroup 1 ends l_c with its own keys (t = 4..7), then the quad
  // butterfly; M (and warpgroup 1's L) take the chunk; the merge factors of O, and whether a warp needs them.
  struct Merge {
    bool seen[2], rescale, all_seen;
    float fa[2], fb[2];
  };
  auto merge_sums = [&](const float (&p)[16], const float (&m)[2], float (&l)[2]) {
    Merge g;
    if (group == 1) {
      const float2 head = x_sum[t128];
      l[0] = head.x;
      l[1] = head.y;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) l[i] = __fadd_rn(l[i], p[4 * t + 2 * i + e]);  // rounding: keys in order
        l[i] = __fadd_rn(l[i], __shfl_xor_sync(0xffffffffu, l[i], 1));  // rounding: quad butterfly, xor 1
        l[i] = __fadd_rn(l[i], __shfl_xor_sync(0xffffffffu, l[i], 2));  // then xor 2
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      g.seen[i] = m[i] != tc::neg_inf();  // else the row sees none of the chunk's keys
      const float mx = fmaxf(big_m[i], m[i]);     // exact
      g.fa[i] = expf(__fsub_rn(big_m[i], mx));    // rounding: RN(M - M'), expf (0 when M = -inf)
      g.fb[i] = expf(__fsub_rn(m[i], mx));        // rounding: RN(m_c - M'), expf
      if (g.seen[i]) {
        if (group == 1) {
          if (g.fa[i] != 1.0f) big_l[i] = WF_RESCALE(big_l[i], g.fa[i]);  // rounding: RN(L a)
          big_l[i] = fmaf(l[i], g.fb[i], big_l[i]);                        // rounding: one fma
        }
        big_m[i] = mx;
      }
    }
    g.rescale = __any_sync(0xffffffffu, (g.seen[0] && g.fa[0] != 1.0f) || (g.seen[1] && g.fa[1] != 1.0f));
    g.all_seen = __all_sync(0xffffffffu, g.seen[0] && g.seen[1]);
    return g;
  };

  // Issues o_c's pass over this warpgroup's dims (at most 128 at a time), fresh from zero, from V stage st and p
  // buffer buf: k-steps over keys in order, per k-step p's parts in turn; one wgmma group.
  auto issue_pv = [&](float (&o)[kPassBlocks][32], int pass, int st, int buf) {
#pragma unroll
    for (int b = 0; b < kPassBlocks; ++b)
#pragma unroll
      for (int j = 0; j < 32; ++j) o[b][j] = 0.0f;
    wg::fence();
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int part = 0; part < kParts; ++part)
#pragma unroll
        for (int b = 0; b < kPassBlocks; ++b)
          wg::ss_n64_tb(o[b], p_desc + (((buf * kParts + part) * wf::kPartBytes + 32 * k) >> 4),
                        v_desc + ((st * kTileBytes + (pass * kPassBlocks + b) * 8192 + 2048 * k) >> 4));
    wg::commit();
  };

  // Merges a finished pass of o_c into O. Warp-uniform branches: RN(O 1) = O, so a warp rescales all its rows
  // when one needs it.
  auto merge_pass = [&](const float (&o)[kPassBlocks][32], int pass, const Merge& g) {
    float (&y)[kPassBlocks][32] = *reinterpret_cast<float (*)[kPassBlocks][32]>(&big_o[pass * kPassBlocks]);
    if (g.rescale) {
      const float by[2] = {g.seen[0] ? g.fa[0] : 1.0f, g.seen[1] ? g.fa[1] : 1.0f};
#pragma unroll
      for (int b = 0; b < kPassBlocks; ++b)
#pragma unroll
        for (int j = 0; j < 32; ++j) y[b][j] = WF_RESCALE(y[b][j], by[j / 2 % 2]);  // rounding: RN(O a)
    }
    if (g.all_seen) {
#pragma unroll
      for (int b = 0; b < kPassBlocks; ++b)
#pragma unroll
        for (int j = 0; j < 32; ++j) y[b][j] = fmaf(o[b][j], g.fb[j / 2 % 2], y[b][j]);  // rounding: one fma
    } else {
#pragma unroll
      for (int b = 0; b < kPassBlocks; ++b)
#pragma unroll
        for (int j = 0; j < 32; ++j)
          if (g.seen[j / 2 % 2]) y[b][j] = fmaf(o[b][j], g.fb[j / 2 % 2], y[b][j]);  // element j: row j / 2 % 2
    }
  };

  if constexpr (kOverlap) {
    // Two block barriers a chunk. Copy groups in order K(c_lo) (with Q), V(c_lo), K(c_lo + 1), then at each
    // chunk's start V(c + 1), K(c + 2), landed by the chunk's end; chunk c uses K/V stage and p buffer c - c_lo mod 2.
    load(false, c_lo);
    load(true, c_lo);
    load(false, c_lo + 1);
    tc::cp_async_wait<2>();  // K(c_lo) and Q
    wg::fence_async_shared();
    __syncthreads();
    float s[16], m[2], l[2];
    issue_scores(s, 0);
    wg::wait0();
    half_max(s, c_lo, m);
    __syncthreads();  // both halves' maxima
    probabilities(s, m, l, 0);
    tc::cp_async_wait<0>();  // V(c_lo) and K(c_lo + 1)
    wg::fence_async_shared();  // their copies and p's stores, for wgmma
    __syncthreads();
    for (int c = c_lo; c <= c_hi; ++c) {
      const int st = (c - c_lo) % 2;
      float next[16], o[kPassBlocks][32];
      issue_scores(next, 1 - st);  // chunk c + 1's (past the last chunk, a stale stage's: never used)
      issue_pv(o, 0, st, st);
      load(true, c + 1);   // into V stage 1 - st: chunk c - 1's p V is done in both warpgroups
      load(false, c + 2);  // into K stage st: chunk c's scores are done in both
      const Merge g = merge_sums(s, m, l);
      wg::wait<1>();  // chunk c + 1's scores (past the last chunk: formed, never used)
#pragma unroll
      for (int j = 0; j < 16; ++j) s[j] = next[j];
      half_max(s, c + 1, m);
      __syncthreads();  // both halves' maxima of chunk c + 1
      probabilities(s, m, l, 1 - st);
      wg::wait0();  // o_c
      merge_pass(o, 0, g);
      tc::cp_async_wait<0>();  // V(c + 1) and K(c + 2)
      wg::fence_async_shared();
      __syncthreads();  // chunk c + 1's p is visible; chunk c's p V is done in both warpgroups
    }
  } else {
    // Three block barriers a chunk, each phase waiting for its wgmma. Copy groups in order K(c_lo) (with Q),
    // V(c_lo), K(c_lo + 1), ...: V(c + stages - 1) goes at chunk c's start, K(c + stages) once its scores are formed.
    load(false, c_lo);
#pragma unroll
    for (int i = 0; i + 1 < kStages; ++i) {
      load(true, c_lo + i);
      load(false, c_lo + i + 1);
    }
    for (int c = c_lo; c <= c_hi; ++c) {
      const int st = (c - c_lo) % kStages;
      tc::cp_async_wait<2 * kStages - 2>();  // this thread's copies of chunk c's K (and Q) have landed
      wg::fence_async_shared();
      __syncthreads();  // and every thread's; chunk c - 1 is done everywhere: its V stage, p and exchange are free
      load(true, c + kStages - 1);
      float s[16], m[2], l[2];
      issue_scores(s, st);
      wg::wait0();
      half_max(s, c, m);
      __syncthreads();  // both halves' maxima; both warpgroups' scores are formed: K's stage st is free
      load(false, c + kStages);
      probabilities(s, m, l, 0);
      tc::cp_async_wait<2 * kStages - 1>();  // chunk c's V
      wg::fence_async_shared();  // V's copies and p's stores, for wgmma
      __syncthreads();
      const Merge g = merge_sums(s, m, l);
#pragma unroll
      for (int pass = 0; pass < kBlocks / kPassBlocks; ++pass) {
        float o[kPassBlocks][32];
        issue_pv(o, pass, st, 0);
        wg::wait0();
        merge_pass(o, pass, g);
      }
    }
  }
  tc::cp_async_wait<0>();

  // Warpgroup 1's L to both warpgroups, then each writes its dims.
  __syncthreads();
  if (group == 1) x_sum[t128] = make_float2(big_l[0], big_l[1]);
  __syncthreads();
  const float2 sums = x_sum[t128];
  const float big_l_all[2] = {sums.x, sums.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int m = 16 * warp + gr + 8 * i;
    if (!wf::holds_row<G>(m, tile.rows)) continue;
    const long long row = static_cast<long long>(tile.row0 + m % kRows) * hq + kh * G + m / kRows;
    unsigned* dst = reinterpret_cast<unsigned*>(out + row * D + group * (D / 2) + 2 * c4);
#pragma unroll
    for (int b = 0; b < kBlocks; ++b)
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const int j = 4 * t + 2 * i;
        const float y0 = __fdiv_rn(big_o[b][j], big_l_all[i]);      // rounding: IEEE
        const float y1 = __fdiv_rn(big_o[b][j + 1], big_l_all[i]);
        dst[(64 * b + 8 * t) / 2] = wf::pack_bf16(y0, y1);  // rounding: bf16
      }
    if (group == 0 && c4 == 0) row_m[row] = big_m[i];
  }
#else
  __trap();  // wgmma needs sm_90a
#endif
}
