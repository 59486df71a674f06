// Split-chunk window-attention prompt: window_prompt_partials computes, for a band of up to 16 consecutive rows
// of one sequence, one (m, l, o) per row and 256-key chunk at absolute positions, scores and p times V on tensor
// cores (m16n8k16, the band's rows as M); window_prompt_merge sums a row's chunks in chunk order.
// D = head dim (128, 256, 512), G = query heads per key head (1..16), PB = 1 rounds p to bf16 before both sums
// (bf16 P), 0 keeps it in fp32 (P32). bf16 travels as uint16_t bit patterns.
//
// Launch geometry: partials<D, G, PB> grid (n_part, kv_heads, bands) of 256 threads, bands = sum over sequences of
// ceil(rows / 16), with wp::kSmemBytes<D> = 128 D + 17664 bytes of dynamic shared memory (the kernel traps on
// less); merge<D, G> grid (kv_heads * G, rows) of 256 threads.
//
// Partials' shared memory, in bytes:
//   [0, 64 (2 D + 16))          bf16 kv_s[64][D + 8]   a 64-key tile of K, then of V (zero off the band's keys)
//   [.., .. + 16640)            fp32 s_s[16][260]      one head's scores of the chunk, then its probabilities

#include <cuda_bf16.h>

// ---------------------------------------------------------------------------------------------------------------
// Fault hooks: the defaults are the kernel; a planted-fault control defines one before including this file.
// ---------------------------------------------------------------------------------------------------------------

// The last key a row at position pos reads, given row_last (its own position or its image span's end).
#ifndef WP_LAST_KEY
#define WP_LAST_KEY(pos, given) (given)
#endif

// Where the chunk grid starts: 0 puts chunks at absolute positions; pos0 is the call's first row of the sequence.
#ifndef WP_CHUNK_ORIGIN
#define WP_CHUNK_ORIGIN(pos0) 0
#endif

// Rounding of p before the sums (bf16 P rounds it to bf16 here).
#ifndef WP_P_ROUND
#define WP_P_ROUND(p, pb) ((pb) ? __bfloat162float(__float2bfloat16_rn(p)) : (p))
#endif

// Merge weight of a chunk with maximum m_c under the row's maximum M.
#ifndef WP_MERGE_FACTOR
#define WP_MERGE_FACTOR(m_c, M) expf(__fsub_rn((m_c), (M)))
#endif

namespace wp {

constexpr int kChunk = 256;     // keys per partial, at absolute positions
constexpr int kBand = 16;       // rows per band: the mma's M
constexpr int kThreads = 256;   // 8 warps
constexpr int kWarps = 8;
constexpr int kTile = 64;       // keys per K or V tile: 8 warps x one n-tile of 8
constexpr int kSStride = 260;   // fp32 per score row (256 keys and padding)

template <int D>
constexpr int kRowHalves = D + 8;  // bf16 per K/V tile row (16 bytes of padding against bank conflicts)

template <int D>
constexpr int kSmemBytes = kTile * kRowHalves<D> * 2 + kBand * kSStride * 4;

constexpr int kSmemLimit = 99 * 1024;  // the opt-in maximum of sm_86, 89, 120 and 121

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// One m16n8k16 bf16 mma, fp32 accumulate in place: c += A (16x16, row) * B (16x8, col).
__device__ __forceinline__ void mma_bf16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The band a partials block takes: its sequence, first row and row count.
struct Band {
  int seq;
  int row0;  // first row of the band (an index into the call's rows)
  int rows;  // 1..16
  int pos0;  // absolute position of the sequence's first row in this call
  int seq_row0;
};

__device__ __forceinline__ Band find_band(const int* seq_row0, const int* seq_pos0, int n_seq, int band) {
  Band b{0, 0, 0, 0, 0};
  for (int s = 0; s < n_seq; ++s) {
    const int rows = seq_row0[s + 1] - seq_row0[s];
    const int bands = (rows + kBand - 1) / kBand;
    if (band < bands) {
      b.seq = s;
      b.seq_row0 = seq_row0[s];
      b.row0 = seq_row0[s] + band * kBand;
      b.rows = min(kBand, seq_row0[s + 1] - b.row0);
      b.pos0 = seq_pos0[s];
      return b;
    }
    band -= bands;
  }
  return b;
}

__device__ __forceinline__ int first_key(int pos, int win) { return win > 0 ? max(0, pos - win + 1) : 0; }

}  // namespace wp

template <int D, int G, int PB>
__global__ void __launch_bounds__(wp::kThreads, 1)
window_prompt_partials(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k_cache,
                       const unsigned short* __restrict__ v_cache, const int* __restrict__ seq_row0,
                       const int* __restrict__ seq_pos0, const int* __restrict__ seq_slot,
                       const int* __restrict__ row_last, float* __restrict__ part_m, float* __restrict__ part_l,
                       float* __restrict__ part_o, int win, int ring, int n_part, float scale, int kv_heads,
                       int n_seq) {
  static_assert(D % 32 == 0 && D <= 512, "D a multiple of 32, at most 512");
  static_assert(G >= 1 && G <= 16, "1 to 16 query heads per key head");
  static_assert(wp::kSmemBytes<D> <= wp::kSmemLimit, "partials shared memory exceeds what sm_86, 89, 120 give");
  constexpr int R = wp::kRowHalves<D>;
  constexpr int NT = D / 64;  // PV n-tiles of 8 dims per warp
  extern __shared__ __align__(16) unsigned char wp_smem[];
  unsigned short* kv_s = reinterpret_cast<unsigned short*>(wp_smem);
  float* s_s = reinterpret_cast<float*>(wp_smem + wp::kTile * R * 2);
  unsigned dyn_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
  if (dyn_bytes < static_cast<unsigned>(wp::kSmemBytes<D>)) __trap();  // launched with less than the layout

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int kh = blockIdx.y;
  const int hq = kv_heads * G;
  const wp::Band band = wp::find_band(seq_row0, seq_pos0, n_seq, blockIdx.z);
  if (band.rows == 0) return;  // block-uniform: a grid wider than the call's bands
  const int origin = WP_CHUNK_ORIGIN(band.pos0);

  // The band's rows: first and last visible key; the chunks any of them touches.
  int lo_key = 0x7fffffff, hi_key = -1;
  for (int r = 0; r < band.rows; ++r) {
    const int pos = band.pos0 + band.row0 + r - band.seq_row0;
    lo_key = min(lo_key, wp::first_key(pos, win));
    hi_key = max(hi_key, WP_LAST_KEY(pos, row_last[band.row0 + r]));
  }
  const int c_lo = (lo_key - origin) / wp::kChunk, c_hi = (hi_key - origin) / wp::kChunk;
  const long long head_base = static_cast<long long>(seq_slot[band.seq]) * ring * kv_heads * D +
                              static_cast<long long>(kh) * D;
  const long long row_elems = static_cast<long long>(kv_heads) * D;

  for (int c = c_lo + blockIdx.x; c <= c_hi; c += gridDim.x) {
    const int key0 = origin + c * wp::kChunk;  // absolute position of the chunk's first key

    // Stage a 64-key tile of K or V: keys outside [lo_key, hi_key] are zero (never read from the cache).
    auto stage = [&](const unsigned short* cache, int t) {
      for (int e = tid; e < wp::kTile * (D / 8); e += wp::kThreads) {
        const int i = e / (D / 8), piece = e % (D / 8);
        const int p = key0 + t * wp::kTile + i;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (p >= lo_key && p <= hi_key) {
          v = __ldg(reinterpret_cast<const uint4*>(cache + head_base + static_cast<long long>(p % ring) * row_elems) +
                    piece);
        }
        *reinterpret_cast<uint4*>(kv_s + i * R + 8 * piece) = v;
      }
    };

    for (int g = 0; g < G; ++g) {
      const int h = kh * G + g;
      // Scores: warp w takes keys 8w .. 8w + 7 of each tile, k-steps over D in the decode kernel's order
      // (lane c4 = lane % 4 holds dims 32 p + 8 c4 + 0..3 in step 2p and + 4..7 in step 2p + 1).
      const int gr = lane / 4, c4 = lane % 4;
      const bool row_a = gr < band.rows, row_b = gr + 8 < band.rows;
      const unsigned short* qa = q + (static_cast<long long>(band.row0 + gr) * hq + h) * D;
      const unsigned short* qb = q + (static_cast<long long>(band.row0 + gr + 8) * hq + h) * D;
      for (int t = 0; t < wp::kChunk / wp::kTile; ++t) {
        __syncthreads();  // the previous tile (or PV's V tile) is read by all
        stage(k_cache, t);
        __syncthreads();
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const unsigned short* kr = kv_s + (8 * warp + gr) * R;
#pragma unroll 2
        for (int p = 0; p < D / 32; ++p) {
          const uint4 a = row_a ? __ldg(reinterpret_cast<const uint4*>(qa + 32 * p + 8 * c4)) : make_uint4(0, 0, 0, 0);
          const uint4 b = row_b ? __ldg(reinterpret_cast<const uint4*>(qb + 32 * p + 8 * c4)) : make_uint4(0, 0, 0, 0);
          const uint4 kk = *reinterpret_cast<const uint4*>(kr + 32 * p + 8 * c4);
          wp::mma_bf16(acc, a.x, b.x, a.y, b.y, kk.x, kk.y);  // rounding: tensor-core k-step (dims +0..3)
          wp::mma_bf16(acc, a.z, b.z, a.w, b.w, kk.z, kk.w);  // rounding: tensor-core k-step (dims +4..7)
        }
        const int col = t * wp::kTile + 8 * warp + 2 * c4;
        s_s[gr * wp::kSStride + col] = __fmul_rn(acc[0], scale);  // rounding: s = RN(dot * scale)
        s_s[gr * wp::kSStride + col + 1] = __fmul_rn(acc[1], scale);
        s_s[(gr + 8) * wp::kSStride + col] = __fmul_rn(acc[2], scale);
        s_s[(gr + 8) * wp::kSStride + col + 1] = __fmul_rn(acc[3], scale);
      }
      __syncthreads();  // every score of the chunk is written

      // Chunk maximum, probabilities and l: warp w takes rows 2w and 2w + 1; lane L owns keys L, L + 32, ...
      for (int rr = 0; rr < 2; ++rr) {
        const int r = 2 * warp + rr;
        if (r >= band.rows) continue;  // warp-uniform
        const int pos = band.pos0 + band.row0 + r - band.seq_row0;
        const int first = wp::first_key(pos, win), last = WP_LAST_KEY(pos, row_last[band.row0 + r]);
        float* srow = s_s + r * wp::kSStride;
        float sv[wp::kChunk / 32];
        float m = wp::neg_inf();
#pragma unroll
        for (int i = 0; i < wp::kChunk / 32; ++i) {
          const int p = key0 + lane + 32 * i;
          sv[i] = (p >= first && p <= last) ? srow[lane + 32 * i] : wp::neg_inf();  // masked keys score -inf
          m = fmaxf(m, sv[i]);  // exact
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));  // exact
        float l = 0.0f;
#pragma unroll
        for (int i = 0; i < wp::kChunk / 32; ++i) {
          float p = sv[i] == wp::neg_inf() ? 0.0f : expf(__fsub_rn(sv[i], m));  // rounding: RN(s - m), expf
          p = WP_P_ROUND(p, PB);                                                // rounding: bf16 P rounds p
          srow[lane + 32 * i] = p;
          l = __fadd_rn(l, p);  // rounding: lane sum in increasing key order
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, off));  // butterfly
        const int j = c - (first - origin) / wp::kChunk;  // the row's partial slot of this chunk
        if (lane == 0 && m != wp::neg_inf() && j >= 0 && j < n_part) {
          const size_t idx = (static_cast<size_t>(band.row0 + r) * hq + h) * n_part + j;
          part_m[idx] = m;
          part_l[idx] = l;
        }
      }

      // PV on tensor cores: warp w takes dims w D / 8 .. (w + 1) D / 8 of the band's rows (NT n-tiles of 8), one
      // k-step per 16 keys in key order; fp32 p (PB = 0) goes in as three bf16 parts hi, mid, lo, which hold it
      // exactly, one k-step each in that order; bf16 p (PB = 1) in one.
      float acc[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
      const int wd0 = warp * (D / 8);  // this warp's first dim
      for (int t = 0; t < wp::kChunk / wp::kTile; ++t) {
        __syncthreads();  // p is written; the previous V tile is read by all
        stage(v_cache, t);
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < wp::kTile / 16; ++ks) {
          const int k0 = t * wp::kTile + 16 * ks;  // the k-step's first key in the chunk
          const float* pa = s_s + gr * wp::kSStride + k0 + 2 * c4;        // row g: keys 2c, 2c + 1, then + 8
          const float* pb = s_s + (gr + 8) * wp::kSStride + k0 + 2 * c4;  // row g + 8
          const float pv[8] = {pa[0], pa[1], pb[0], pb[1], pa[8], pa[9], pb[8], pb[9]};
          unsigned b[NT][2];  // V[keys 2c, 2c + 1 | 2c + 8, 2c + 9][dim wd0 + 8 nt + g]
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const unsigned short* vc = kv_s + (16 * ks + 2 * c4) * R + wd0 + 8 * nt + gr;
            b[nt][0] = static_cast<unsigned>(vc[0]) | (static_cast<unsigned>(vc[R]) << 16);
            b[nt][1] = static_cast<unsigned>(vc[8 * R]) | (static_cast<unsigned>(vc[9 * R]) << 16);
          }
          float rest[8];
#pragma unroll
          for (int i = 0; i < 8; ++i) rest[i] = pv[i];
#pragma unroll
          for (int part = 0; part < (PB ? 1 : 3); ++part) {
            unsigned short h[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              h[i] = __bfloat16_as_ushort(__float2bfloat16_rn(rest[i]));  // exact for bf16 p and the last part
              rest[i] = __fsub_rn(rest[i], __bfloat162float(__ushort_as_bfloat16(h[i])));  // exact: a split
            }
            const unsigned a0 = h[0] | (static_cast<unsigned>(h[1]) << 16), a1 = h[2] | (static_cast<unsigned>(h[3]) << 16);
            const unsigned a2 = h[4] | (static_cast<unsigned>(h[5]) << 16), a3 = h[6] | (static_cast<unsigned>(h[7]) << 16);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) wp::mma_bf16(acc[nt], a0, a1, a2, a3, b[nt][0], b[nt][1]);  // k-step
          }
        }
      }
      for (int half = 0; half < 2; ++half) {  // rows g and g + 8
        const int r = gr + 8 * half;
        if (r >= band.rows) continue;
        const int pos = band.pos0 + band.row0 + r - band.seq_row0;
        const int first = wp::first_key(pos, win), last = WP_LAST_KEY(pos, row_last[band.row0 + r]);
        const int j = c - (first - origin) / wp::kChunk;
        if (key0 + wp::kChunk > first && key0 <= last && j >= 0 && j < n_part) {
          float* dst = part_o + ((static_cast<size_t>(band.row0 + r) * hq + h) * n_part + j) * D + wd0 + 2 * c4;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            *reinterpret_cast<float2*>(dst + 8 * nt) = make_float2(acc[nt][2 * half], acc[nt][2 * half + 1]);
          }
        }
      }
    }
  }
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
  const int first = wp::first_key(pos, win), last = WP_LAST_KEY(pos, row_last[b]);
  const int origin = WP_CHUNK_ORIGIN(seq_pos0[s]);
  const int n = min(n_part, (last - origin) / wp::kChunk - (first - origin) / wp::kChunk + 1);
  const size_t base = (static_cast<size_t>(b) * hq + h) * n_part;
  float big_m = wp::neg_inf();
  for (int c = 0; c < n; ++c) big_m = fmaxf(big_m, part_m[base + c]);  // exact
  for (int d = threadIdx.x; d < D; d += wp::kThreads) {
    float big_l = 0.0f, big_o = 0.0f;
    for (int c = 0; c < n; ++c) {
      const float f = WP_MERGE_FACTOR(part_m[base + c], big_m);  // rounding: RN(m_c - M), expf
      big_l = fmaf(f, part_l[base + c], big_l);                  // rounding: fma chain in chunk order
      big_o = fmaf(f, part_o[(base + c) * D + d], big_o);        // rounding: fma chain in chunk order
    }
    const float y = __fdiv_rn(big_o, big_l);                     // rounding: IEEE division
    out[(static_cast<size_t>(b) * hq + h) * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(y));  // rounding: bf16
  }
}
