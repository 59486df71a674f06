// Fused window-attention prompt on warpgroup tensor cores (sm_90a): window_prompt_attend takes 64 / G consecutive
// rows of one sequence with the G query heads of one key head (64 rows of the wgmma, each K and V chunk read once
// for all G heads), walks their keys in 64-key chunks at absolute positions and merges each chunk into the rows'
// running (M, L, O) in registers, so only the output and each row's largest score reach global memory. D = head
// dim (128, 256, 512), G = query heads per key head (1..16), PB = 1 rounds p to bf16 before both sums (bf16 P),
// 0 keeps it fp32 (P32, as three exact bf16 parts). bf16 travels as uint16_t bit patterns.
//
// Launch geometry: grid (tiles, kv_heads), tiles = sum over sequences of ceil(rows / (64 / G)) (64 / G rounded
// down; wgmma row m holds row m % (64 / G) of query head m / (64 / G), rows from G 64 / G on idle); 256 threads, two
// warpgroups; wf::kSmemBytes<D, PB> bytes of dynamic shared memory (the kernel traps on any other size). Off sm_90a
// it traps. How the warpgroups share the work (wf::kChains<D>):
//   - head dims 128 and 512, one merge chain: warpgroup g scores the chunk's keys 32 g .. 32 g + 31 and owns output
//     dims g D / 2 .. (g + 1) D / 2, exchanging chunk maxima, p and l_c's first half through shared memory;
//   - head dim 256, two merge chains: warpgroup g takes the chunks c with c % 2 == g whole (all 64 keys, all D
//     dims, p in registers), each its own chain of merges into its own (M, L, O); the chains meet once at the end.
//
// Shared memory: Q, then K and V tiles, each a 64 x D bf16 tile stored as D / 64 blocks of 64 rows x 128 bytes with
// the 128-byte swizzle (16-byte piece j of row r at piece j ^ (r % 8)): K-major for Q and K (rows are rows or
// keys), MN-major for V (rows are keys). One chain: K and V of wf::kStages<D> chunks, p's bf16 parts (64 rows x 64
// keys each, K-major, swizzled) and the warpgroups' exchange of chunk maxima and partial sums. Two chains: each
// warpgroup's own K and V tile (then the chains' exchange), and the exchange area unused.
//
// The order, per row and chunk (sum_order window_prompt_wgmma, docs/kernel-contract.md 8.1):
//   s = RN(dot * scale), dot by wgmma k-steps over dims 16 s .. 16 s + 15 in order from 0; masked keys -inf;
//   m_c = max s (exact); p = expf(RN(s - m_c)), rounded to bf16 for bf16 P;
//   l_c: lane c4 of the row's quad adds keys 8 t + 2 c4 + e (t = 0..7, e = 0, 1) in order from 0 (one chain:
//        warpgroup 0 adds t = 0..3 and hands its sum to warpgroup 1, which adds t = 4..7), then the quad butterfly
//        (xor 1, then 2);
//   o_c: wgmma k-steps over keys 16 k .. 16 k + 15 from 0, per k-step p's parts hi, mid, lo in turn;
//   merge (per chain: chunk c joins chain c % merge_chains, in increasing c): M' = max(M, m_c),
//          a = expf(RN(M - M')), b = expf(RN(m_c - M')), L = fma(l_c, b, RN(L a)), O = fma(o_c, b, RN(O a)); a chunk
//          the row does not see leaves (M, L, O) as they were;
//   chains: chain 1's (M, L, O) merged into chain 0's as a chunk is (merge_chains 2);
//   out = bf16(RN(O / L)), row_m = M.

#include <cuda_bf16.h>
#include "tensor_core.cuh"
#include "wgmma.cuh"

namespace wf {

// Descriptor byte offsets (leading, stride) of the K-major tiles (Q, K, p) and of the MN-major V tile.
constexpr int kKLbo = 16;
constexpr int kKSbo = 1024;
constexpr int kVLbo = 1024;
constexpr int kVSbo = 1024;

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

// Merge chains (docs 8.1, merge_chains): two at head dim 256, where each warpgroup holds all D dims of O for its
// own chunks; one where O's dims must be split between the warpgroups (512) or the exchange is cheap (128).
template <int D>
constexpr int kChains = D == 256 ? 2 : 1;

template <int D>
constexpr int kPBuffers = kChains<D> == 1 ? 1 : 0;  // two chains keep p in registers

// Q and K/V tiles: one chain: Q, then K and V of kStages chunks; two chains: Q, then each warpgroup's K and V.
template <int D>
constexpr int kTiles = kChains<D> == 1 ? 1 + 2 * kStages<D> : 1 + 2 * kChains<D>;

template <int D, int PB>
constexpr int kSmemBytes = kTiles<D> * kTileBytes<D> + kPBuffers<D> * kParts<PB> * kPartBytes + kExchangeBytes;

// What kcontract reads back from the cubin (contract.yaml `exports`), per launched instance <D, G, PB>:
template <int D, int G, int PB>
__constant__ const int kExportAttendSmemBytes =  // the attend launch's dynamic shared memory on this SM:
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030 || \
                               __CUDA_ARCH__ == 1100)
    +kSmemBytes<D, PB>;  // SMs of 227 KB opt-in shared memory per block
#else
    0;  // elsewhere none, as the contract launches it (the kernel traps off sm_90a)
#endif

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

// A thread's share of copying a 64 x D bf16 tile into swizzled shared memory when Threads threads copy it (thread
// index t): the 16-byte pieces at column col = 8 (t % (D / 8)) of rows r0 + kStep n (consecutive threads on
// consecutive pieces of a row).
template <int D, int Threads>
struct Share {
  static constexpr int kStep = Threads * 8 / D;  // rows between a thread's pieces
  static constexpr int kPieces = kTile / kStep;
  static_assert(kStep % 8 == 0 || kStep == 4 || kStep == 2, "a piece's swizzle repeats every one, two or four pieces");
  int r0, col, at[4];
  __device__ __forceinline__ explicit Share(int t) : r0(t / (D / 8)), col(8 * (t % (D / 8))) {
#pragma unroll
    for (int n = 0; n < 4; ++n) at[n] = swizzled(r0 + n * kStep % 8, col) - (n * kStep % 8) * 128;
  }
  // Pieces n and n + 8 / kStep share their swizzle (where kStep < 8): the row's offset adds to a stored base.
  __device__ __forceinline__ int offset(int n) const { return at[kStep % 8 ? n % (8 / kStep) : 0] + n * kStep * 128; }
};

// This thread's pieces of the cache rows of keys key0 .. key0 + 63 (at slot key % ring) into a swizzled tile;
// keys outside [lo_key, hi_key] are zeros and read nothing. One copy group is the caller's.
template <int D, int Threads>
__device__ __forceinline__ void load_keys(unsigned char* dst, const unsigned short* src, long long row_elems,
                                          int key0, int lo_key, int hi_key, int ring, const Share<D, Threads>& sh) {
  using S = Share<D, Threads>;
  const int kr = key0 % ring;  // the cache row of the chunk's first key
  if (key0 >= lo_key && key0 + kChunk - 1 <= hi_key && kr + kChunk <= ring) {  // uniform: every key, no wrap
    const unsigned short* from = src + static_cast<long long>(kr + sh.r0) * row_elems;
#pragma unroll
    for (int n = 0; n < S::kPieces; ++n) tc::cp_async16(dst + sh.offset(n), from + n * S::kStep * row_elems, 16u);
    return;
  }
#pragma unroll
  for (int n = 0; n < S::kPieces; ++n) {
    const int key = key0 + sh.r0 + n * S::kStep;
    int row = kr + sh.r0 + n * S::kStep;
    while (row >= ring) row -= ring;
    const bool on = key >= lo_key && key <= hi_key;
    tc::cp_async16(dst + sh.offset(n), src + (on ? row : 0) * row_elems, on ? 16u : 0u);
  }
}

// Arrive and wait with the 128 threads of warpgroup g (warp-uniform) at its named barrier, 1 + g (ids the compiler
// knows, so the kernel holds three barriers, not all sixteen).
__device__ __forceinline__ void warpgroup_barrier(int g) {
  if (g == 0)
    asm volatile("bar.sync 1, 128;\n" : : : "memory");
  else
    asm volatile("bar.sync 2, 128;\n" : : : "memory");
}

// RN of two floats to bf16 in one word, lo in the low half; and the halves back as floats (exact).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
__device__ __forceinline__ float low_half(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float high_half(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// What both schedules know of a block: where its tiles are, this thread's place, its rows' keys, the tile's keys.
struct Block {
  unsigned char* q_s;    // Q
  unsigned char* tiles;  // the K and V tiles after Q, then (one chain) p and the exchange
  const unsigned short* k_head;  // row 0 of the sequence's slot in the caches, at the key head's first dim
  const unsigned short* v_head;
  long long row_elems;  // elements per cache row (all key heads)
  Tile tile;
  int kh, hq, ring;
  float scale;
  int t128, warp, group, gr, c4;
  int first[2], last[2];  // visible keys of this thread's wgmma rows 16 warp + gr + 8 i (none for an idle row)
  int lo_key, hi_key;        // the tile's keys
  int all_first, all_last;   // keys every row of the tile sees
  int c_lo, c_hi;            // the tile's chunks
};

// Scales and masks a chunk's scores s[4 t + 2 i + e] (row i, key key0 + 8 t + 2 c4 + e, NT n-tiles of 8 keys) and
// gives each row's maximum over them (exact; the row's quad shares it).
template <int NT>
__device__ __forceinline__ void scale_mask_max(float (&s)[4 * NT], int key0, const Block& b, float (&m)[2]) {
#pragma unroll
  for (int j = 0; j < 4 * NT; ++j) s[j] = __fmul_rn(s[j], b.scale);  // rounding: RN(dot * scale)
  if (key0 < b.all_first || key0 + 8 * NT - 1 > b.all_last) {  // warp-uniform: some row misses some key
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key0 + 8 * t + 2 * b.c4 + e;
          if (key < b.first[i] || key > b.last[i]) s[4 * t + 2 * i + e] = tc::neg_inf();  // masked keys: -inf
        }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    m[i] = tc::neg_inf();
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) m[i] = fmaxf(m[i], s[4 * t + 2 * i + e]);  // exact
    m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 1));  // exact: the row's quad
    m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 2));
  }
}

// s becomes p = expf(RN(s - m_c)) (bf16 P: rounded to bf16; 0 for a masked key), and where `sum` (warp-uniform),
// l[i] adds row i's p in the declared lane order (t outer, e inner) onto its start.
template <int NT, int PB>
__device__ __forceinline__ void probabilities(float (&s)[4 * NT], const float (&m)[2], float (&l)[2], bool sum) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * t + 2 * i + e];
        float p = expf(__fsub_rn(x, m[i]));  // rounding: RN(s - m_c), expf
        if (PB) p = __bfloat162float(__float2bfloat16_rn(p));  // rounding: bf16 P rounds p
        if (sum) l[i] = __fadd_rn(l[i], p);  // rounding: the lane's keys in order
        x = p;
      }
}

// The quad butterfly that ends l_c: each thread adds its xor-1 neighbour's sum, then its xor-2 neighbour's.
__device__ __forceinline__ void quad_butterfly(float (&l)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] = __fadd_rn(l[i], __shfl_xor_sync(0xffffffffu, l[i], 1));  // rounding: xor 1
    l[i] = __fadd_rn(l[i], __shfl_xor_sync(0xffffffffu, l[i], 2));  // then xor 2
  }
}

// A chunk's (or a chain's) merge into a row's running state: the factors of O, and whether a warp needs them.
struct Merge {
  bool seen[2], rescale, all_seen;
  float fa[2], fb[2];
};

// M and, where `owns_l` (warp-uniform), L take (m_c, l_c) (a row that sees none of it keeps its state); the
// factors for O.
__device__ __forceinline__ Merge merge_factors(float (&big_m)[2], float (&big_l)[2], const float (&m)[2],
                                               const float (&l)[2], bool owns_l) {
  Merge g;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    g.seen[i] = m[i] != tc::neg_inf();
    const float mx = fmaxf(big_m[i], m[i]);     // exact
    g.fa[i] = expf(__fsub_rn(big_m[i], mx));    // rounding: RN(M - M'), expf (0 when M = -inf)
    g.fb[i] = expf(__fsub_rn(m[i], mx));        // rounding: RN(m_c - M'), expf
    if (g.seen[i]) {
      if (owns_l) {
        if (g.fa[i] != 1.0f) big_l[i] = __fmul_rn(big_l[i], g.fa[i]);  // rounding: RN(L a)
        big_l[i] = fmaf(l[i], g.fb[i], big_l[i]);                        // rounding: one fma
      }
      big_m[i] = mx;
    }
  }
  g.rescale = __any_sync(0xffffffffu, (g.seen[0] && g.fa[0] != 1.0f) || (g.seen[1] && g.fa[1] != 1.0f));
  g.all_seen = __all_sync(0xffffffffu, g.seen[0] && g.seen[1]);
  return g;
}

// O's 64-dim block y takes o_c's y = fma(o, b, RN(y a)) for the rows that see the chunk. Warp-uniform branches:
// RN(y 1) = y, so a warp rescales all its rows when one needs it. Element j belongs to row j / 2 % 2.
__device__ __forceinline__ void merge_block(float (&y)[32], const float (&o)[32], const Merge& g) {
  if (g.rescale) {
    const float by[2] = {g.seen[0] ? g.fa[0] : 1.0f, g.seen[1] ? g.fa[1] : 1.0f};
#pragma unroll
    for (int j = 0; j < 32; ++j) y[j] = __fmul_rn(y[j], by[j / 2 % 2]);  // rounding: RN(O a)
  }
  if (g.all_seen) {
#pragma unroll
    for (int j = 0; j < 32; ++j) y[j] = fmaf(o[j], g.fb[j / 2 % 2], y[j]);  // rounding: one fma
  } else {
#pragma unroll
    for (int j = 0; j < 32; ++j)
      if (g.seen[j / 2 % 2]) y[j] = fmaf(o[j], g.fb[j / 2 % 2], y[j]);
  }
}

// Writes this thread's NB blocks of 64 output dims from dim0 for its used rows: bf16(RN(O / L)); row_m where asked.
template <int D, int G, int NB>
__device__ __forceinline__ void store_rows(const Block& b, const float (&o)[NB][32], int dim0, const float (&l)[2],
                                           const float (&big_m)[2], bool with_m, unsigned short* out, float* row_m) {
  constexpr int kRows = wf::kRows<G>;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int m = 16 * b.warp + b.gr + 8 * i;
    if (!holds_row<G>(m, b.tile.rows)) continue;
    const long long row = static_cast<long long>(b.tile.row0 + m % kRows) * b.hq + b.kh * G + m / kRows;
    unsigned* dst = reinterpret_cast<unsigned*>(out + row * D + dim0 + 2 * b.c4);
#pragma unroll
    for (int n = 0; n < NB; ++n)
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const int j = 4 * t + 2 * i;
        const float y0 = __fdiv_rn(o[n][j], l[i]);  // rounding: IEEE
        const float y1 = __fdiv_rn(o[n][j + 1], l[i]);
        dst[(64 * n + 8 * t) / 2] = pack_bf16(y0, y1);  // rounding: bf16
      }
    if (with_m && b.c4 == 0) row_m[row] = big_m[i];
  }
}

// One merge chain (head dims 128 and 512): the warpgroups split each chunk's keys for the scores and the output's
// dims for p V and meet at three block barriers a chunk; K of chunk c + kStages goes once both have formed chunk
// c's scores, V of chunk c + kStages - 1 at chunk c's start.
template <int D, int G, int PB>
__device__ __forceinline__ void attend_one_chain(const Block& b, unsigned long long q_desc, unsigned short* out,
                                                 float* row_m) {
  constexpr int kParts = wf::kParts<PB>;
  constexpr int kStages = wf::kStages<D>;
  constexpr int kSteps = D / 16;                          // score k-steps per chunk
  constexpr int kBlocks = D / 128;                        // 64-dim output blocks a warpgroup owns
  constexpr int kPassBlocks = kBlocks < 2 ? kBlocks : 2;  // o_c of at most 128 dims in registers at once
  constexpr int kTileBytes = wf::kTileBytes<D>;
  const int group = b.group, t128 = b.t128, warp = b.warp, lane = t128 % 32;
  unsigned char* k_s = b.tiles;                          // [stages] chunks
  unsigned char* v_s = k_s + kStages * kTileBytes;       // [stages] chunks
  unsigned char* p_s = v_s + kStages * kTileBytes;       // [parts] 64 x 64 tiles
  float2* x_max = reinterpret_cast<float2*>(p_s + kParts * wf::kPartBytes);  // [group][128]
  float2* x_sum = x_max + 2 * 128;                                          // [128]
  const Share<D, kThreads> share(threadIdx.x);

  // K or V of chunk c into its stage, one copy group (empty past the last chunk: the wait counts stay uniform).
  auto load = [&](bool value, int c) {
    if (c <= b.c_hi) {
      unsigned char* dst = (value ? v_s : k_s) + ((c - b.c_lo) % kStages) * kTileBytes;
      load_keys<D, kThreads>(dst, (value ? b.v_head : b.k_head) + share.col, b.row_elems, c * kChunk, b.lo_key,
                             b.hi_key, b.ring, share);
    }
    tc::cp_async_commit();
  };

  // Descriptors of each operand's first k-step; a later one adds its byte offset / 16 (the address field's unit).
  const unsigned long long k_desc = wg::smem_desc(k_s + group * kHalf * 128, wf::kKLbo, wf::kKSbo, 1);
  const unsigned long long v_desc = wg::smem_desc(v_s + group * kBlocks * 8192, wf::kVLbo, wf::kVSbo, 1);
  const unsigned long long p_desc = wg::smem_desc(p_s, wf::kKLbo, wf::kKSbo, 1);

  float big_m[2] = {tc::neg_inf(), tc::neg_inf()}, big_l[2] = {0.0f, 0.0f};  // L: warpgroup 1's
  float big_o[kBlocks][32];  // this warpgroup's D / 2 dims: blocks of 64 dims, each in the accumulator layout
#pragma unroll
  for (int n = 0; n < kBlocks; ++n)
#pragma unroll
    for (int j = 0; j < 32; ++j) big_o[n][j] = 0.0f;

  load(false, b.c_lo);
#pragma unroll
  for (int i = 0; i + 1 < kStages; ++i) {
    load(true, b.c_lo + i);
    load(false, b.c_lo + i + 1);
  }
  for (int c = b.c_lo; c <= b.c_hi; ++c) {
    const int st = (c - b.c_lo) % kStages;
    tc::cp_async_wait<2 * kStages - 2>();  // this thread's copies of chunk c's K (and Q) have landed
    wg::fence_async_shared();
    __syncthreads();  // and every thread's; chunk c - 1 is done everywhere: its V stage, p and exchange are free
    load(true, c + kStages - 1);

    // Scores of the tile's 64 rows against this warpgroup's 32 keys: k-steps over dims 16 s .. + 15 in order.
    float s[16], m[2], l[2];
    wg::fence();
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const unsigned long long qd = q_desc + (kstep_bytes(ks) >> 4);
      const unsigned long long kd = k_desc + ((st * kTileBytes + kstep_bytes(ks)) >> 4);
      if (ks == 0) wg::ss_n32<false>(s, qd, kd); else wg::ss_n32(s, qd, kd);
    }
    wg::commit();
    wg::wait0();
    scale_mask_max<4>(s, c * kChunk + group * kHalf, b, m);
    x_max[group * 128 + t128] = make_float2(m[0], m[1]);
    __syncthreads();  // both halves' maxima; both warpgroups' scores are formed: K's stage st is free
    load(false, c + kStages);

    // m becomes the chunk's m_c, s becomes p; warpgroup 0 starts each row's l_c over its keys (t = 0..3 of the
    // chunk's eight n-tiles) and hands it over; p's parts go to shared memory.
    const float2 other = x_max[(1 - group) * 128 + t128];
    m[0] = fmaxf(m[0], other.x);  // exact: the chunk's maximum m_c
    m[1] = fmaxf(m[1], other.y);
    l[0] = l[1] = 0.0f;
    probabilities<4, PB>(s, m, l, group == 0);
    if (group == 0) x_sum[t128] = make_float2(l[0], l[1]);
    {  // matrix (row half i, n-tile t) of this warp's 16 rows goes to key piece 4 g + t of each part, K-major
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
            w[f] = pack_bf16(x[j], x[j + 1]);  // rounding: RN to bf16 (exact for bf16 P's p); each split exact
            x[j] = __fsub_rn(x[j], low_half(w[f]));
            x[j + 1] = __fsub_rn(x[j + 1], high_half(w[f]));
          }
          const int piece = 4 * group + 2 * half + mat / 2;
          wg::stmatrix_x4(p_s + part * wf::kPartBytes + row * 128 + ((piece ^ rr) * 16), w);
        }
    }
    tc::cp_async_wait<2 * kStages - 1>();  // chunk c's V
    wg::fence_async_shared();  // V's copies and p's stores, for wgmma
    __syncthreads();

    // Warpgroup 1 ends l_c with its own keys (t = 4..7) and the quad butterfly, and owns L.
    if (group == 1) {
      const float2 head = x_sum[t128];
      l[0] = head.x;
      l[1] = head.y;
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) l[i] = __fadd_rn(l[i], s[4 * t + 2 * i + e]);  // rounding: keys in order
      quad_butterfly(l);
    }
    const Merge g = merge_factors(big_m, big_l, m, l, group == 1);

    // o_c over this warpgroup's dims, at most 128 at a time: k-steps over keys in order, per k-step p's parts.
#pragma unroll
    for (int pass = 0; pass < kBlocks / kPassBlocks; ++pass) {
      float o[kPassBlocks][32];
      wg::fence();
#pragma unroll
      for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int part = 0; part < kParts; ++part)
#pragma unroll
          for (int n = 0; n < kPassBlocks; ++n) {
            const unsigned long long pd = p_desc + ((part * wf::kPartBytes + 32 * k) >> 4);
            const unsigned long long vd = v_desc + ((st * kTileBytes + (pass * kPassBlocks + n) * 8192 + 2048 * k) >> 4);
            if (k == 0 && part == 0) wg::ss_n64_tb<false>(o[n], pd, vd); else wg::ss_n64_tb(o[n], pd, vd);
          }
      wg::commit();
      wg::wait0();
#pragma unroll
      for (int n = 0; n < kPassBlocks; ++n) merge_block(big_o[pass * kPassBlocks + n], o[n], g);
    }
  }
  tc::cp_async_wait<0>();

  // Warpgroup 1's L to both warpgroups, then each writes its dims.
  __syncthreads();
  if (group == 1) x_sum[t128] = make_float2(big_l[0], big_l[1]);
  __syncthreads();
  const float2 sums = x_sum[t128];
  const float big_l_all[2] = {sums.x, sums.y};
  store_rows<D, G, kBlocks>(b, big_o, group * (D / 2), big_l_all, big_m, group == 0, out, row_m);
}

// Two merge chains (head dim 256): warpgroup g takes the chunks c with c % 2 == g whole and merges them into its own
// (M, L, O) over all D dims, with no block barrier: its own K and V tiles and two warpgroup barriers a chunk, V of
// a chunk issued as its scores start, K of its next chunk as its p V starts. p stays in registers (the A operand of
// p V). At the end chain 1 is merged into chain 0 as a chunk is, each warpgroup for half the dims.
template <int D, int G, int PB>
__device__ __forceinline__ void attend_two_chains(const Block& b, unsigned long long q_desc, unsigned short* out,
                                                  float* row_m) {
  constexpr int kParts = wf::kParts<PB>;
  constexpr int kSteps = D / 16;   // score k-steps per chunk
  constexpr int kBlocks = D / 64;  // 64-dim blocks of O, each one p V pass
  constexpr int kTileBytes = wf::kTileBytes<D>;
  static_assert(kBlocks % 2 == 0, "each warpgroup writes half of O's blocks");
  const int group = b.group, t128 = b.t128;
  unsigned char* k_own = b.tiles + group * 2 * kTileBytes;  // this warpgroup's K tile, then its V tile
  unsigned char* v_own = k_own + kTileBytes;
  const Share<D, 128> share(t128);

  // K or V of chunk c into this warpgroup's tile, one copy group (empty past the last chunk).
  auto load = [&](bool value, int c) {
    if (c <= b.c_hi)
      load_keys<D, 128>(value ? v_own : k_own, (value ? b.v_head : b.k_head) + share.col, b.row_elems, c * kChunk,
                        b.lo_key, b.hi_key, b.ring, share);
    tc::cp_async_commit();
  };
  const unsigned long long k_desc = wg::smem_desc(k_own, wf::kKLbo, wf::kKSbo, 1);
  const unsigned long long v_desc = wg::smem_desc(v_own, wf::kVLbo, wf::kVSbo, 1);

  float big_m[2] = {tc::neg_inf(), tc::neg_inf()}, big_l[2] = {0.0f, 0.0f};
  float big_o[kBlocks][32];  // all D dims: blocks of 64 dims, each in the accumulator layout
#pragma unroll
  for (int n = 0; n < kBlocks; ++n)
#pragma unroll
    for (int j = 0; j < 32; ++j) big_o[n][j] = 0.0f;

  // Copy groups in order: Q (the caller's), K(c_first), then per chunk c: V(c) once every warp's p V of chunk c - 2
  // is done (the first barrier), K(c + 2) once every warp has formed chunk c's scores (the second).
  const int c_first = b.c_lo + ((b.c_lo & 1) ^ group);  // this chain's first chunk
  load(false, c_first);
  tc::cp_async_wait<0>();  // Q and K(c_first)
  wg::fence_async_shared();
  __syncthreads();  // every thread's Q
  for (int c = c_first; c <= b.c_hi; c += 2) {
    tc::cp_async_wait<0>();  // K(c)
    wg::fence_async_shared();
    warpgroup_barrier(group);  // K(c) is in; every warp's p V of chunk c - 2 is done: the V tile is free
    load(true, c);

    // Scores of the tile's 64 rows against the chunk's 64 keys: k-steps over dims 16 s .. + 15 in order.
    float s[32], m[2], l[2] = {0.0f, 0.0f};
    wg::fence();
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const unsigned long long qd = q_desc + (kstep_bytes(ks) >> 4), kd = k_desc + (kstep_bytes(ks) >> 4);
      if (ks == 0) wg::ss_n64<false>(s, qd, kd); else wg::ss_n64(s, qd, kd);
    }
    wg::commit();
    wg::wait0();
    scale_mask_max<8>(s, c * kChunk, b, m);
    probabilities<8, PB>(s, m, l, true);
    quad_butterfly(l);
    // p as the A operand of k-step k (keys 16 k .. + 15): row gr then gr + 8 of n-tile 2 k, then of 2 k + 1.
    unsigned a[kParts][4][4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        float x0 = s[8 * k + 2 * f], x1 = s[8 * k + 2 * f + 1];
#pragma unroll
        for (int part = 0; part < kParts; ++part) {
          a[part][k][f] = pack_bf16(x0, x1);  // rounding: RN to bf16 (exact for bf16 P's p); each split exact
          x0 = __fsub_rn(x0, low_half(a[part][k][f]));
          x1 = __fsub_rn(x1, high_half(a[part][k][f]));
        }
      }
    const Merge g = merge_factors(big_m, big_l, m, l, true);

    tc::cp_async_wait<0>();  // V(c)
    wg::fence_async_shared();
    warpgroup_barrier(group);  // V(c) is in; every warp's scores of chunk c are formed: the K tile is free
    load(false, c + 2);
    // o_c, one 64-dim block per pass: k-steps over keys in order, per k-step p's parts in turn. bf16 P keeps two
    // passes in flight (the next issued before the last merges); P32's parts leave registers for one.
    auto issue = [&](float (&o)[32], int n) {
      wg::fence();
#pragma unroll
      for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int part = 0; part < kParts; ++part) {
          const unsigned long long vd = v_desc + ((n * 8192 + 2048 * k) >> 4);
          if (k == 0 && part == 0) wg::rs_n64_tb<false>(o, a[part][k], vd); else wg::rs_n64_tb(o, a[part][k], vd);
        }
      wg::commit();
    };
    if constexpr (PB) {
      float o[2][32];
      issue(o[0], 0);
#pragma unroll
      for (int n = 0; n < kBlocks; ++n) {
        if (n + 1 < kBlocks) {
          issue(o[(n + 1) % 2], n + 1);
          wg::wait<1>();
        } else {
          wg::wait0();
        }
        merge_block(big_o[n], o[n % 2], g);
      }
    } else {
      float o[32];
#pragma unroll
      for (int n = 0; n < kBlocks; ++n) {
        issue(o, n);
        wg::wait0();
        merge_block(big_o[n], o, g);
      }
    }
  }
  tc::cp_async_wait<0>();

  // The chains meet: each warpgroup leaves (M, L) and the other's half of O in its own tiles, then merges chain 1
  // into chain 0 for its half of the dims (warpgroup g: blocks g kBlocks / 2 ..).
  constexpr int kHalfBlocks = kBlocks / 2;
  __syncthreads();  // both chains are done: every tile is free
  float4* own_ml = reinterpret_cast<float4*>(k_own);
  float4* own_o = reinterpret_cast<float4*>(v_own);
  own_ml[t128] = make_float4(big_m[0], big_m[1], big_l[0], big_l[1]);
#pragma unroll
  for (int n = 0; n < kHalfBlocks; ++n)
#pragma unroll
    for (int j = 0; j < 32; j += 4) {  // the other warpgroup's blocks: (1 - g) kHalfBlocks + n
      float y[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) y[e] = group ? big_o[n][j + e] : big_o[kHalfBlocks + n][j + e];
      own_o[(n * 8 + j / 4) * 128 + t128] = make_float4(y[0], y[1], y[2], y[3]);
    }
  __syncthreads();
  const float4* other_ml = reinterpret_cast<const float4*>(b.tiles + (1 - group) * 2 * kTileBytes);
  const float4* other_o = reinterpret_cast<const float4*>(b.tiles + (1 - group) * 2 * kTileBytes + kTileBytes);
  const float4 mine = own_ml[t128], theirs = other_ml[t128];
  const float4 ch0 = group ? theirs : mine, ch1 = group ? mine : theirs;  // chain 0's and chain 1's (M, L)
  const float m0[2] = {ch0.x, ch0.y}, l0[2] = {ch0.z, ch0.w}, m1[2] = {ch1.x, ch1.y}, l1[2] = {ch1.z, ch1.w};
  float big_m_all[2], big_l_all[2], fa[2], fb[2];
  bool joins[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    joins[i] = m1[i] != tc::neg_inf();  // else chain 1 saw none of the row's keys: chain 0 stands
    const float mx = fmaxf(m0[i], m1[i]);  // exact
    fa[i] = expf(__fsub_rn(m0[i], mx));    // rounding: RN(M - M'), expf (0 when chain 0 saw nothing)
    fb[i] = expf(__fsub_rn(m1[i], mx));    // rounding: RN(M_1 - M'), expf
    big_m_all[i] = joins[i] ? mx : m0[i];
    big_l_all[i] = joins[i] ? fmaf(l1[i], fb[i], __fmul_rn(l0[i], fa[i])) : l0[i];  // rounding: RN(L a), one fma
  }
  float y[kHalfBlocks][32];
#pragma unroll
  for (int n = 0; n < kHalfBlocks; ++n)
#pragma unroll
    for (int j = 0; j < 32; j += 4) {
      const float4 got = other_o[(n * 8 + j / 4) * 128 + t128];
      const float theirs_o[4] = {got.x, got.y, got.z, got.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float own = group ? big_o[kHalfBlocks + n][j + e] : big_o[n][j + e];
        const float o0 = group ? theirs_o[e] : own, o1 = group ? own : theirs_o[e];
        const int i = (j + e) / 2 % 2;
        y[n][j + e] = joins[i] ? fmaf(o1, fb[i], __fmul_rn(o0, fa[i])) : o0;  // rounding: RN(O a), one fma
      }
    }
  store_rows<D, G, kHalfBlocks>(b, y, group * (D / 2), big_l_all, big_m_all, group == 0, out, row_m);
}

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
  constexpr int kRows = wf::kRows<G>;
  extern __shared__ __align__(1024) unsigned char wf_smem[];
  unsigned dyn_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
  if (dyn_bytes != static_cast<unsigned>(wf::kSmemBytes<D, PB>)) __trap();  // the launch must give the layout
  if (static_cast<unsigned>(__cvta_generic_to_shared(wf_smem)) % 1024) __trap();  // the swizzle's atoms align

  wf::Block b;
  b.q_s = wf_smem;
  b.tiles = wf_smem + wf::kTileBytes<D>;
  const int tid = threadIdx.x;
  b.t128 = tid % 128;
  b.warp = b.t128 / 32;
  b.group = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform, and known so: descriptors stay uniform
  b.gr = tid % 32 / 4;
  b.c4 = tid % 4;
  b.kh = blockIdx.y;
  b.hq = kv_heads * G;
  b.ring = ring;
  b.scale = scale;
  b.tile = tc::find_rows<kRows>(seq_row0, seq_pos0, n_seq, blockIdx.x);
  if (b.tile.rows == 0) return;  // block-uniform: a grid wider than the call's tiles

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int m = 16 * b.warp + b.gr + 8 * i, r = m % kRows;
    const bool used = wf::holds_row<G>(m, b.tile.rows);
    const int pos = b.tile.pos0 + b.tile.row0 + r - b.tile.seq_row0;
    b.first[i] = used ? wf::first_key(pos, win) : 1;
    b.last[i] = used ? row_last[b.tile.row0 + r] : 0;  // the row's position, or its image span's end
  }
  int lo_key = 0x7fffffff, hi_key = -1, all_first = -1, all_last = 0x7fffffff;
  for (int r = 0; r < b.tile.rows; ++r) {
    const int pos = b.tile.pos0 + b.tile.row0 + r - b.tile.seq_row0;
    const int f = wf::first_key(pos, win), l = row_last[b.tile.row0 + r];
    lo_key = min(lo_key, f);
    hi_key = max(hi_key, l);
    all_first = max(all_first, f);
    all_last = min(all_last, l);
  }
  b.lo_key = __shfl_sync(0xffffffffu, lo_key, 0);  // the same in every thread: made known as uniform
  b.hi_key = __shfl_sync(0xffffffffu, hi_key, 0);
  b.all_first = __shfl_sync(0xffffffffu, all_first, 0);
  b.all_last = __shfl_sync(0xffffffffu, all_last, 0);
  b.c_lo = b.lo_key / wf::kChunk;
  b.c_hi = b.hi_key / wf::kChunk;
  b.row_elems = static_cast<long long>(kv_heads) * D;
  const long long head_at = static_cast<long long>(seq_slot[b.tile.seq]) * ring * b.row_elems +
                            static_cast<long long>(b.kh) * D;
  b.k_head = k_cache + head_at;
  b.v_head = v_cache + head_at;

  const wf::Share<D, wf::kThreads> share(tid);
#pragma unroll
  for (int n = 0; n < wf::Share<D, wf::kThreads>::kPieces; ++n) {  // Q, one copy group; idle wgmma rows are zeros
    const int m = share.r0 + n * wf::Share<D, wf::kThreads>::kStep;
    const bool used = wf::holds_row<G>(m, b.tile.rows);
    const long long row = b.tile.row0 + (used ? m % kRows : 0);
    const int head = b.kh * G + (used ? m / kRows : 0);
    tc::cp_async16(b.q_s + share.offset(n), q + (row * b.hq + head) * D + share.col, used ? 16u : 0u);
  }
  tc::cp_async_commit();
  const unsigned long long q_desc = wg::smem_desc(b.q_s, wf::kKLbo, wf::kKSbo, 1);
  if constexpr (wf::kChains<D> == 2)
    wf::attend_two_chains<D, G, PB>(b, q_desc, out, row_m);
  else
    wf::attend_one_chain<D, G, PB>(b, q_desc, out, row_m);
#else
  __trap();  // wgmma needs sm_90a
#endif
}
