// Split-chunk window-attention prompt: window_prompt_partials computes, for a band of up to 16 consecutive rows
// of one sequence, one (m, l, o) per row and 256-key chunk at absolute positions, scores and p times V on tensor
// cores (m16n8k16, the band's rows as M); window_prompt_merge sums a row's chunks in chunk order.
// D = head dim (128, 256, 512), G = query heads per key head (1..16), PB = 1 rounds p to bf16 before both sums
// (bf16 P), 0 keeps it in fp32 (P32). bf16 travels as uint16_t bit patterns.
//
// Launch geometry: partials<D, G, PB> grid (bands, kv_heads, n_part) of 256 threads, bands = sum over sequences of
// ceil(rows / 16), bands fastest (the blocks that read one chunk's K and V run together and find it in L2), with
// wp::kSmemBytes<D, G, PB> = HP (25344 - 8704 PB) + ring (32 D + 2048) bytes of dynamic shared memory (the kernel
// traps on any other size), HP = 4 heads per pass where 4 divides G on SMs of 227 KB, else 2 where G is even, else
// 1, ring = min(8, (optin - HP (25344 - 8704 PB)) / (32 D + 2048)) V
// stages, optin the SM's opt-in bytes per block (99 KB; sm_80 163 KB; sm_90, 100 227 KB); merge<D, G> grid
// (kv_heads * G, rows) of 256 threads.
//
// Partials' shared memory, in bytes, for a pass over HP query heads:
//   [0, HP (25344 - 8704 PB))   bf16 q_s[HP][16][D]             the pass's Q (16-byte pieces swizzled), then over it
//                               fp32 s_s[HP][16][260]           its scores of the chunk, then over them
//                               bf16 p_s[HP][parts][16][264]    its p as bf16 parts (P32: hi, mid, lo; bf16 P: p)
//   [.., + ring (32 D + 2048))  bf16 v_s[8][ring][16][D/8 + 8]  each warp's V stages in flight (cp.async)
// Every warp reads the whole of the band's Q, staged once per pass; each warp reads the K rows of its own keys
// and the V columns of its own dims, so neither is shared: K goes straight to registers, V through the warp's own
// ring (ldmatrix.trans); both serve the pass's HP heads.

#include <cuda_bf16.h>
#include "tensor_core.cuh"

namespace wp {

constexpr int kChunk = 256;     // keys per partial, at absolute positions
constexpr int kBand = 16;       // rows per band: the mma's M
constexpr int kThreads = 256;   // 8 warps
constexpr int kWarps = 8;
constexpr int kTile = 64;       // keys per score pass: warp w takes keys 8 w + 64 t, t = 0..3
constexpr int kSStride = 260;   // fp32 per score row (256 keys and padding)
constexpr int kPStride = 264;   // bf16 per p row (256 keys and 16 bytes of padding against bank conflicts)

template <int PB>
constexpr int kParts = PB ? 1 : 3;  // bf16 parts of p: fp32 p is exactly hi + mid + lo

template <int D>
constexpr int kVStride = D / 8 + 8;  // bf16 per V stage row (a warp's D / 8 dims and 16 bytes of padding)

// The shared memory a block may opt in to on the SM this compiles for (the contract's {smem_optin}).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030 || \
                               __CUDA_ARCH__ == 1100)
constexpr int kSmemLimit = 227 * 1024;
#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 870)
constexpr int kSmemLimit = 163 * 1024;
#else
constexpr int kSmemLimit = 99 * 1024;  // sm_86, 88, 89, 120, 121
#endif

template <int D>
constexpr int kStageBytes = kWarps * 16 * kVStride<D> * 2;  // one V stage of every warp

// One head's scores of a chunk, then (over them, once read) its p as bf16 parts: whichever is larger.
template <int PB>
constexpr int kHeadFront = PB ? kBand * kSStride * 4 : kParts<PB> * kBand * kPStride * 2;

// Query heads per pass over the chunk's K and V.
template <int D, int G, int PB>
constexpr int kPass = G % 4 == 0 && kSmemLimit >= 227 * 1024 ? 4  // sm_90, 100: 227 KB
                      : G % 2 == 0                              ? 2
                                                                : 1;

template <int D, int G, int PB>
constexpr int kFrontBytes = kPass<D, G, PB> * kHeadFront<PB>;

// V stages of 16 keys in flight per warp: as many as the rest of the limit holds, at most 8.
template <int D, int G, int PB>
constexpr int kRing = (kSmemLimit - kFrontBytes<D, G, PB>) / kStageBytes<D> < 8
                          ? (kSmemLimit - kFrontBytes<D, G, PB>) / kStageBytes<D>
                          : 8;

template <int D, int G, int PB>
constexpr int kSmemBytes = kFrontBytes<D, G, PB> + kRing<D, G, PB> * kStageBytes<D>;

// What kcontract reads back from the cubin (contract.yaml `exports`), per launched instance <D, G, PB>:
template <int D, int G, int PB>
__constant__ const int kExportPartialsSmemBytes = +kSmemBytes<D, G, PB>;  // on the SM this compiles for

template <int D, int G, int PB>
constexpr int kMinBlocks = D == 512 || kPass<D, G, PB> > 1 ? 1 : 2;  // two per SM where 128 registers do

using tc::neg_inf;

using Band = tc::RowBlock;
using tc::first_key;

}  // namespace wp

template <int D, int G, int PB>
__global__ void __launch_bounds__(wp::kThreads, wp::kMinBlocks<D, G, PB>)
window_prompt_partials(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k_cache,
                       const unsigned short* __restrict__ v_cache, const int* __restrict__ seq_row0,
                       const int* __restrict__ seq_pos0, const int* __restrict__ seq_slot,
                       const int* __restrict__ row_last, float* __restrict__ part_m, float* __restrict__ part_l,
                       float* __restrict__ part_o, int win, int ring, int n_part, float scale, int kv_heads,
                       int n_seq) {
  static_assert(D == 128 || D == 256 || D == 512, "head dim 128, 256 or 512");
  static_assert(G >= 1 && G <= 16, "1 to 16 query heads per key head");
  static_assert(wp::kSmemBytes<D, G, PB> <= wp::kSmemLimit, "partials shared memory exceeds what the SM gives");
  static_assert(wp::kRing<D, G, PB> >= 2, "two V stages at least: one read while the next lands");
  constexpr int HP = wp::kPass<D, G, PB>;      // heads per pass
  constexpr int NT = D / 64;                   // PV n-tiles of 8 dims per warp
  constexpr int kParts = wp::kParts<PB>;
  constexpr int kRing = wp::kRing<D, G, PB>;
  constexpr int VS = wp::kVStride<D>;
  constexpr int kPieces = D / 64;              // 16-byte pieces of a warp's dims in one V row
  static_assert(32 % kPieces == 0 && 16 * kPieces >= 32, "a stage's pieces split evenly over the lanes");
  constexpr int kSteps = wp::kChunk / 16;      // PV k-steps per chunk
  constexpr int kPairs = 2 * HP;               // (head, row) pairs per warp in the softmax
  constexpr int kQSteps = D / 32;              // score steps of 32 dims (two k-steps each)
  constexpr int kAhead = wp::kMinBlocks<D, G, PB> == 2 ? 1 : 3;  // K steps loaded ahead (kAhead + 1 | kQSteps)
  constexpr int kQPieces = D / 8;              // 16-byte pieces of one Q row
  static_assert(kQSteps % (kAhead + 1) == 0, "score steps come in groups of kAhead + 1");
  static_assert(HP * wp::kBand * D * 2 <= wp::kFrontBytes<D, G, PB>, "the pass's Q fits where its scores go");
  extern __shared__ __align__(16) unsigned char wp_smem[];
  unsigned short* q_s = reinterpret_cast<unsigned short*>(wp_smem);  // [HP][16][D] the pass's Q (swizzled)
  float* s_s = reinterpret_cast<float*>(wp_smem);                    // [HP][16][kSStride] scores, over it
  unsigned short* p_s = reinterpret_cast<unsigned short*>(wp_smem);  // [HP][parts][16][kPStride] p, over them
  unsigned short* v_all = reinterpret_cast<unsigned short*>(wp_smem + wp::kFrontBytes<D, G, PB>);
  unsigned dyn_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
  if (dyn_bytes != static_cast<unsigned>(wp::kSmemBytes<D, G, PB>)) __trap();  // the launch must give the layout

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gr = lane / 4, c4 = lane % 4;
  const int kh = blockIdx.y;
  const int hq = kv_heads * G;
  const wp::Band band = tc::find_rows<wp::kBand>(seq_row0, seq_pos0, n_seq, blockIdx.x);
  if (band.rows == 0) return;  // block-uniform: a grid wider than the call's bands
  unsigned short* v_s = v_all + warp * kRing * 16 * VS;  // this warp's V ring
  const int wd0 = warp * (D / 8);                        // this warp's first dim in p times V

  // The band's rows: first and last visible key; the chunks any of them touches.
  int lo_key = 0x7fffffff, hi_key = -1;
  for (int r = 0; r < band.rows; ++r) {
    const int pos = band.pos0 + band.row0 + r - band.seq_row0;
    lo_key = min(lo_key, wp::first_key(pos, win));
    hi_key = max(hi_key, row_last[band.row0 + r]);  // the row's position, or its image span's end
  }
  const int c_lo = lo_key / wp::kChunk, c_hi = hi_key / wp::kChunk;  // chunks at absolute positions
  const long long head_base = static_cast<long long>(seq_slot[band.seq]) * ring * kv_heads * D +
                              static_cast<long long>(kh) * D;
  const int row_elems = kv_heads * D;  // one cache row of every key head

  for (int c = c_lo + blockIdx.z; c <= c_hi; c += gridDim.z) {
    const int key0 = c * wp::kChunk;  // absolute position of the chunk's first key
    const int ring0 = key0 % ring;              // its cache row

    // Stage st of this warp's V: keys key0 + 16 st .. + 15, its D / 8 dims; keys off the band's are zero.
    auto stage_v = [&](int st) {
      if (st < kSteps) {
        unsigned short* dst = v_s + (st % kRing) * 16 * VS;
#pragma unroll
        for (int n = 0; n < 16 * kPieces / 32; ++n) {  // lane copies piece lane % kPieces of rows i, i + 32 / kPieces..
          const int i = lane / kPieces + n * (32 / kPieces), piece = lane % kPieces;
          const int p = key0 + 16 * st + i;
          const bool on = p >= lo_key && p <= hi_key;
          int row = ring0 + 16 * st + i;  // p's cache row
          if (row >= ring) row %= ring;
          const unsigned short* src = v_cache + head_base + static_cast<long long>(on ? row : 0) * row_elems +
                                      wd0 + 8 * piece;
          tc::cp_async16(dst + i * VS + 8 * piece, src, on ? 16u : 0u);
        }
      }
      tc::cp_async_commit();  // one group per stage, empty past the chunk's end: the wait counts stay uniform
    };

    // This warp's keys for scores: 8 w + 64 t + gr, t = 0..3 (zero fragments off the band's keys).
    const uint4* k_ptr[4];  // the key's K row at this lane's dims, or null off the band's keys
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int p = key0 + wp::kTile * t + 8 * warp + gr;
      const long long at = head_base + static_cast<long long>(p % ring) * row_elems + 8 * c4;
      k_ptr[t] = p >= lo_key && p <= hi_key ? reinterpret_cast<const uint4*>(k_cache + at) : nullptr;
    }

    for (int g = 0; g < G; g += HP) {
      const int h0 = kh * G + g;  // the pass's first query head
      __syncthreads();  // the previous pass's p is read by all (and each warp's ring): Q goes over it
      // The pass's Q rows into q_s, rows past the band zero; piece i of row r at piece i ^ 4 (r % 2), so that
      // the score loop's 16-byte reads (rows 2 k and 2 k + 1 in one phase) hit distinct banks.
      for (int e = tid; e < HP * wp::kBand * kQPieces; e += wp::kThreads) {
        const int hh = e / (wp::kBand * kQPieces), r = e / kQPieces % wp::kBand, piece = e % kQPieces;
        const bool on = r < band.rows;
        const long long row = band.row0 + (on ? r : 0);
        const unsigned short* src = q + (row * hq + h0 + hh) * D + 8 * piece;
        tc::cp_async16(q_s + (hh * wp::kBand + r) * D + 8 * (piece ^ ((r & 1) << 2)), src, on ? 16u : 0u);
      }
      tc::cp_async_commit();
#pragma unroll
      for (int st = 0; st < kRing - 1; ++st) stage_v(st);  // V loads overlap the scores and the softmax
      tc::cp_async_wait<kRing - 1>();  // this thread's Q pieces have landed (the V stages after them may not)
      __syncthreads();                 // and every thread's

      // Scores: 4 n-tiles per warp and head, k-steps over D in the decode kernel's order (lane c4 holds dims
      // 32 p + 8 c4 + 0..3 in step 2 p and + 4..7 in step 2 p + 1); one K fragment serves the pass's heads, and
      // the K fragments of the next kAhead steps are in flight while a step's mma run.
      float acc[HP][4][4];
#pragma unroll
      for (int hh = 0; hh < HP; ++hh)
#pragma unroll
        for (int t = 0; t < 4; ++t) acc[hh][t][0] = acc[hh][t][1] = acc[hh][t][2] = acc[hh][t][3] = 0.0f;
      uint4 kf[kAhead + 1][4];  // K of the warp's 4 n-tiles, one step per slot
      auto load_k = [&](uint4 (&f)[4], int p) {
#pragma unroll
        for (int t = 0; t < 4; ++t) f[t] = k_ptr[t] ? __ldg(k_ptr[t] + 4 * p) : make_uint4(0, 0, 0, 0);
      };
      const int q_swz = (gr & 1) << 2;  // rows gr and gr + 8 share the swizzle
#pragma unroll
      for (int i = 0; i < kAhead; ++i) load_k(kf[i], i);
#pragma unroll 1
      for (int p0 = 0; p0 < kQSteps; p0 += kAhead + 1) {  // slot i of kf holds step p0 + i
#pragma unroll
        for (int i = 0; i <= kAhead; ++i) {
          const int p = p0 + i;
          if (p + kAhead < kQSteps) load_k(kf[(i + kAhead) % (kAhead + 1)], p + kAhead);
          const uint4* k = kf[i];
          uint4 a[HP], b[HP];  // Q rows gr and gr + 8 of each head at this lane's dims
#pragma unroll
          for (int hh = 0; hh < HP; ++hh) {
            const unsigned short* qa = q_s + (hh * wp::kBand + gr) * D + 8 * ((4 * p + c4) ^ q_swz);
            a[hh] = *reinterpret_cast<const uint4*>(qa);
            b[hh] = *reinterpret_cast<const uint4*>(qa + 8 * D);
          }
          // rounding: one k-step each, dims + 0..3 then + 4..7 per accumulator (the independent ones in between)
#pragma unroll
          for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int hh = 0; hh < HP; ++hh)
              tc::mma_bf16(acc[hh][t], a[hh].x, b[hh].x, a[hh].y, b[hh].y, k[t].x, k[t].y);
#pragma unroll
          for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int hh = 0; hh < HP; ++hh)
              tc::mma_bf16(acc[hh][t], a[hh].z, b[hh].z, a[hh].w, b[hh].w, k[t].z, k[t].w);
        }
      }
      __syncthreads();  // every warp has read Q: the scores go over it
#pragma unroll
      for (int hh = 0; hh < HP; ++hh) {
        float* srow = s_s + hh * wp::kBand * wp::kSStride;
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int col = wp::kTile * t + 8 * warp + 2 * c4;
          srow[gr * wp::kSStride + col] = __fmul_rn(acc[hh][t][0], scale);  // rounding: s = RN(dot * scale)
          srow[gr * wp::kSStride + col + 1] = __fmul_rn(acc[hh][t][1], scale);
          srow[(gr + 8) * wp::kSStride + col] = __fmul_rn(acc[hh][t][2], scale);
          srow[(gr + 8) * wp::kSStride + col + 1] = __fmul_rn(acc[hh][t][3], scale);
        }
      }
      __syncthreads();  // every score of the pass is written

      // Chunk maximum, probabilities and l: warp w takes (head, row) pairs kPairs w ..; lane L owns keys L, L + 32.
      float pv[kPairs][wp::kChunk / 32];
#pragma unroll
      for (int i = 0; i < kPairs; ++i) {
        const int hh = (kPairs * warp + i) / wp::kBand, r = (kPairs * warp + i) % wp::kBand;
#pragma unroll
        for (int j = 0; j < wp::kChunk / 32; ++j) pv[i][j] = 0.0f;
        if (r >= band.rows) continue;  // warp-uniform: a short band's missing rows get p = 0
        const int pos = band.pos0 + band.row0 + r - band.seq_row0;
        const int first = wp::first_key(pos, win), last = row_last[band.row0 + r];
        const float* srow = s_s + (hh * wp::kBand + r) * wp::kSStride;
        float m = tc::neg_inf();
#pragma unroll
        for (int j = 0; j < wp::kChunk / 32; ++j) {
          const int p = key0 + lane + 32 * j;
          pv[i][j] = (p >= first && p <= last) ? srow[lane + 32 * j] : tc::neg_inf();  // masked keys score -inf
          m = fmaxf(m, pv[i][j]);  // exact
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));  // exact
        float l = 0.0f;
#pragma unroll
        for (int j = 0; j < wp::kChunk / 32; ++j) {
          float p = pv[i][j] == tc::neg_inf() ? 0.0f : expf(__fsub_rn(pv[i][j], m));  // rounding: RN(s - m), expf
          if (PB) p = __bfloat162float(__float2bfloat16_rn(p));                     // rounding: bf16 P rounds p
          l = __fadd_rn(l, p);  // rounding: lane sum in increasing key order
          pv[i][j] = p;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, off));  // butterfly
        const int j = c - first / wp::kChunk;  // the row's partial slot of this chunk
        if (lane == 0 && m != tc::neg_inf() && j >= 0 && j < n_part) {
          const size_t idx = (static_cast<size_t>(band.row0 + r) * hq + h0 + hh) * n_part + j;
          part_m[idx] = m;
          part_l[idx] = l;
        }
      }
      __syncthreads();  // every score is read: p goes over them
#pragma unroll
      for (int i = 0; i < kPairs; ++i) {
        const int hh = (kPairs * warp + i) / wp::kBand, r = (kPairs * warp + i) % wp::kBand;
#pragma unroll
        for (int j = 0; j < wp::kChunk / 32; ++j) {
          float rest = pv[i][j];  // p as bf16 parts hi, mid, lo: each split is exact, and so is the last part
#pragma unroll
          for (int part = 0; part < kParts; ++part) {
            const unsigned short h16 = __bfloat16_as_ushort(__float2bfloat16_rn(rest));
            rest = __fsub_rn(rest, __bfloat162float(__ushort_as_bfloat16(h16)));
            p_s[((hh * kParts + part) * wp::kBand + r) * wp::kPStride + lane + 32 * j] = h16;
          }
        }
      }
      __syncthreads();  // p is written

      // PV on tensor cores: warp w takes dims w D / 8 .. (w + 1) D / 8 of the band's rows (NT n-tiles of 8), one
      // k-step per 16 keys in key order, and per k-step the parts of p in order hi, mid, lo; one V stage serves
      // the pass's heads.
      float o[HP][NT][4];
#pragma unroll
      for (int hh = 0; hh < HP; ++hh)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) o[hh][nt][0] = o[hh][nt][1] = o[hh][nt][2] = o[hh][nt][3] = 0.0f;
      for (int st = 0; st < kSteps; ++st) {
        tc::cp_async_wait<kRing - 2>();  // this lane's copies of stage st have landed
        __syncwarp();                    // and every lane's
        stage_v(st + kRing - 1);         // into the slot stage st - 1 used
        const unsigned short* vst = v_s + (st % kRing) * 16 * VS;
        unsigned b[NT / 2][4];  // V: b0, b1 of n-tile 2 np, then of 2 np + 1; one fragment serves the pass's heads
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          tc::ldmatrix_x4<true>(b[np], vst + (lane % 8 + 8 * ((lane / 8) % 2)) * VS + 16 * np + 8 * (lane / 16));
        }
        unsigned a[HP][kParts][4];  // p: each head's parts
#pragma unroll
        for (int hh = 0; hh < HP; ++hh)
#pragma unroll
          for (int part = 0; part < kParts; ++part) {
            tc::ldmatrix_x4<false>(a[hh][part], p_s + ((hh * kParts + part) * wp::kBand + lane % 16) * wp::kPStride +
                                                    16 * st + 8 * (lane / 16));
          }
        // rounding: one k-step each, parts hi, mid, lo in turn per accumulator (the independent ones in between)
#pragma unroll
        for (int part = 0; part < kParts; ++part)
#pragma unroll
          for (int hh = 0; hh < HP; ++hh)
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {  // n-tiles 2 np and 2 np + 1
              const unsigned* pa = a[hh][part];
              tc::mma_bf16(o[hh][2 * np], pa[0], pa[1], pa[2], pa[3], b[np][0], b[np][1]);
              tc::mma_bf16(o[hh][2 * np + 1], pa[0], pa[1], pa[2], pa[3], b[np][2], b[np][3]);
            }
      }
#pragma unroll
      for (int hh = 0; hh < HP; ++hh)
        for (int half = 0; half < 2; ++half) {  // rows g and g + 8
          const int r = gr + 8 * half;
          if (r >= band.rows) continue;
          const int pos = band.pos0 + band.row0 + r - band.seq_row0;
          const int first = wp::first_key(pos, win), last = row_last[band.row0 + r];
          const int j = c - first / wp::kChunk;
          if (key0 + wp::kChunk > first && key0 <= last && j >= 0 && j < n_part) {
            float* dst = part_o + ((static_cast<size_t>(band.row0 + r) * hq + h0 + hh) * n_part + j) * D + wd0 + 2 * c4;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              *reinterpret_cast<float2*>(dst + 8 * nt) = make_float2(o[hh][nt][2 * half], o[hh][nt][2 * half + 1]);
            }
          }
        }
    }
  }
  tc::cp_async_wait<0>();  // no copy is in flight when the block ends
}

template <int D, int G>
__global__ void __launch_bounds__(wp::kThreads)
window_prompt_merge(const float* __restrict__ part_m, const float* __restrict__ part_l,
                    const float* __restrict__ part_o, const int* __restrict__ seq_row0,
                    const int* __restrict__ seq_pos0, const int* __restrict__ row_last,
                    unsigned short* __restrict__ out, int win, int n_part, int kv_heads, int n_seq) {
  const int h = blockIdx.x, b = blockIdx.y;
  const int hq = kv_heads * G;
  int s = 0;
  while (s + 1 < n_seq && seq_row0[s + 1] <= b) ++s;
  const int pos = seq_pos0[s] + b - seq_row0[s];
  const int first = wp::first_key(pos, win), last = row_last[b];
  const int n = min(n_part, last / wp::kChunk - first / wp::kChunk + 1);
  const size_t base = (static_cast<size_t>(b) * hq + h) * n_part;
  float big_m = tc::neg_inf();
  for (int c = 0; c < n; ++c) big_m = fmaxf(big_m, part_m[base + c]);  // exact
  for (int d = threadIdx.x; d < D; d += wp::kThreads) {
    float big_l = 0.0f, big_o = 0.0f;
    for (int c = 0; c < n; ++c) {
      const float f = expf(__fsub_rn(part_m[base + c], big_m));  // rounding: RN(m_c - M), expf
      big_l = fmaf(f, part_l[base + c], big_l);                  // rounding: fma chain in chunk order
      big_o = fmaf(f, part_o[(base + c) * D + d], big_o);        // rounding: fma chain in chunk order
    }
    const float y = __fdiv_rn(big_o, big_l);                     // rounding: IEEE division
    out[(static_cast<size_t>(b) * hq + h) * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(y));  // rounding: bf16
  }
}
