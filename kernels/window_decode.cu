// Split-chunk window-attention decode: window_decode_partials computes one (m, l, o) per 256-key chunk at
// absolute positions; window_decode_merge sums a row's chunks in eight runs, each in chunk order, and adds the
// runs in warp order. D = head dim (128, 256, 512), G = query heads per key head (1..16). bf16 travels as uint16_t
// bit patterns.
//
// Launch geometry: partials<D, G> grid (n_part, kv_heads, B) of 256 threads with wd::kPartialsSmemBytes<D, G>
// = 17408 + 160 * D bytes of dynamic shared memory (the contract's launch expression; the kernel traps on any other);
// merge<D, G> grid (kv_heads * G, B) of 256 threads.
//
// Partials' shared memory layout, in bytes:
//   [0, 1024)                   int  key_row[256]        cache row of each chunk key, -1 where the key is masked
//   [1024, 1024 + 32 D)         bf16 q_s[16][D]          the block's queries, heads >= G zero
//   [.., .. + 16384)            fp32 p_s[256][16]        scores, then probabilities
//   [.., .. + 128 D)            bf16 v_s[4][16][D]       V stages in flight (cp.async), 16 keys each
//   [0, KG * G * D * 4)         fp32 red_s[KG][G][D]     per-key-group PV sums; aliases the above after PV
// with DT = 8 if G <= 4, 4 if G <= 8, else 2 (PV dims per thread) and KG = 256 * DT / D (PV key groups).
// The merge's static shared memory: 8 * D * 4 + 64 bytes (each warp's run of chunks, its l and its maximum).

#include <cuda_bf16.h>
#include "tensor_core.cuh"

namespace wd {

constexpr int kChunk = 256;                               // C: keys per partial, at absolute positions
constexpr int kThreads = 256;                             // partials block: one thread per chunk key in setup
constexpr int kWarps = kThreads / 32;                     // 8 warps
constexpr int kTileKeys = 16;                             // keys per mma m-tile (m16n8k16)
constexpr int kTilesPerWarp = kChunk / kTileKeys / kWarps;  // 2: warp w takes m-tiles w and w + 8
#if __CUDA_ARCH__ == 900
constexpr int kMinBlocks = 2;  // partials blocks per SM the registers must allow: sm_90's shared memory holds two
#else
constexpr int kMinBlocks = 1;  // elsewhere shared memory (or 128 registers) allows one at head dim 512 anyway
#endif
constexpr int kKDepth = 2;                                // K k-pair stages of both m-tiles per lane (2 KiB/warp each)
constexpr int kHeadSlots = 16;                            // Q staging rows: two n-tiles of 8 heads cover G <= 16
constexpr int kPStride = 16;                              // fp32 per key in p_s: one column per head slot
constexpr int kMergeThreads = 256;                        // merge block
constexpr int kMergeWarps = kMergeThreads / 32;           // 8 warps, each summing a run of the row's chunks
constexpr int kKeyRowBytes = kChunk * 4;                  // int key_row[256]
constexpr int kPBytes = kChunk * kPStride * 4;            // fp32 p_s[256][16]
constexpr int kVStages = 4;                               // V stages: kVStages - 1 in flight while one is read
constexpr int kVKeys = 16;                                // chunk keys per V stage
constexpr int kSmemLimit = 99 * 1024;                     // the opt-in maximum of sm_86, 89, 120 and 121

static_assert(kThreads == kChunk, "setup gives one chunk key to each thread");
static_assert(kChunk % (kTileKeys * kWarps) == 0, "the chunk's m-tiles must split evenly over the warps");
static_assert(kTilesPerWarp == 2, "the score loop advances exactly two m-tiles per warp together");
static_assert(kChunk % 32 == 0, "each lane owns chunk keys lane, lane + 32, ... in the exp phase");
static_assert(kChunk >= kVKeys, "at least one V stage: its first barrier publishes P to the PV loop");
static_assert(kPStride % 4 == 0, "p_s rows are read as float4");
static_assert(kKeyRowBytes % 16 == 0, "q_s follows key_row and is read in 16-byte pieces");

// Host-mirrorable sizes (variable templates: NVRTC compiles no host functions).
// PV dims per thread: G * DT <= 32 accumulators per thread.
template <int G>
constexpr int kDimsPerThread = G <= 4 ? 8 : (G <= 8 ? 4 : 2);
// PV key groups: the block's threads split into groups of D / DT threads, each owning a key range.
template <int D, int G>
constexpr int kKeyGroups = kThreads / (D / kDimsPerThread<G>);
// Key-group reduction buffer in bytes (none when one group holds the whole chunk).
template <int D, int G>
constexpr int kReduceBytes = kKeyGroups<D, G> > 1 ? kKeyGroups<D, G> * G * D * 4 : 0;
// Dynamic shared memory of window_decode_partials<D, G> in bytes (the header comment gives the layout).
template <int D, int G>
constexpr int kPartialsSmemBytes = kKeyRowBytes + kHeadSlots * D * 2 + kPBytes + kVStages * kVKeys * D * 2;
// What kcontract reads back from the cubin (contract.yaml `exports`), per launched instance <D, G>:
template <int D, int G>
__constant__ const int kExportPartialsSmemBytes = +kPartialsSmemBytes<D, G>;  // partials' dynamic shared memory
template <int D, int G>
__constant__ const int kExportPvKeyGroups = +kKeyGroups<D, G>;  // KG = 256 DT / D: o_c's fma chains per chunk
template <int D, int G>
__constant__ const int kExportMergeRuns = +kMergeWarps;  // the merge's runs of chunks, added in warp order
template <int D, int G>
struct Traits {
  static_assert(D == 128 || D == 256 || D == 512, "head dim D must be 128, 256 or 512");
  static_assert(G >= 1 && G <= 16, "G (query heads per key head) must be in 1..16");

  static constexpr int kPairs = D / 32;                   // k-pairs: one 16-byte K load per A row covers 2 k-steps
  static constexpr int kNTiles = G > 8 ? 2 : 1;           // mma n-tiles of 8 heads
  static constexpr int kQBytes = kHeadSlots * D * 2;      // bf16 q_s[16][D]
  static constexpr int kDT = kDimsPerThread<G>;          // PV dims per thread
  static constexpr int kTPG = D / kDT;                    // PV threads per key group
  static constexpr int kKG = kKeyGroups<D, G>;            // PV key groups
  static constexpr int kKPG = kChunk / kKG;               // keys per PV key group
  static constexpr int kVPieces = kVKeys * D / 8;         // 16-byte pieces of one V stage
  static constexpr int kMergeLaneDims = D / 32;           // merge dims per lane
  static constexpr int kSmem = kPartialsSmemBytes<D, G>;

  static_assert(D % 32 == 0, "D must be a whole number of 32-dim k-pairs");
  static_assert((kKeyRowBytes + kQBytes) % 16 == 0, "p_s must start 16-byte aligned for its float4 reads");
  static_assert(G <= 8 * kNTiles && 8 * kNTiles <= kHeadSlots, "the n-tiles must cover G within the Q staging rows");
  static_assert(G * kDT <= 32, "at most 32 PV accumulators per thread");
  static_assert(D % kDT == 0, "the PV dims must split evenly over a key group's threads");
  static_assert(kThreads % kTPG == 0, "the block must be a whole number of PV key groups");
  static_assert(kChunk % kKG == 0, "the PV key groups must split the chunk evenly");
  static_assert(kVKeys % kKG == 0 && kKPG % (kVKeys / kKG) == 0, "V stages must split evenly over the key groups");
  static_assert(kVPieces % kThreads == 0, "every thread copies the same number of pieces of a V stage");
  static_assert(kDT == 2 || kDT == 4 || kDT == 8, "a V load is 4, 8 or 16 bytes");
  static_assert(D % 128 == 0, "a merge lane reads its dims as float4 pieces 128 apart");
  static_assert(kSmem <= kSmemLimit, "partials shared memory exceeds what sm_86, 89, 120 and 121 give a block");
  static_assert(kReduceBytes<D, G> <= kSmem, "the key-group reduction buffer must fit the shared memory");
};

// A row's visible keys [first, last] and its number of partials.
struct Span {
  int first;  // first visible key
  int last;   // last visible key
  int count;  // partial slots the row uses: chunks first / C .. last / C
};

__device__ __forceinline__ Span row_span(int pos, int win) {
  Span s;
  s.first = win > 0 ? max(0, pos - win + 1) : 0;
  s.last = pos;
  s.count = s.last / kChunk - s.first / kChunk + 1;
  return s;
}

// Query head of group slot g for key head kh: key head kh serves query heads kh G .. kh G + G - 1.
template <int G>
__device__ __forceinline__ int q_head(int kh, int g, int hk) { return kh * G + g; }

using tc::cp_async16;
using tc::cp_async_commit;
using tc::cp_async_wait;
using tc::mma_bf16;
using tc::neg_inf;

// bf16 bits to fp32 (exact): the low and the high element of a packed word.
__device__ __forceinline__ float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

}  // namespace wd

template <int D, int G>
__global__ void __launch_bounds__(wd::kThreads, wd::kMinBlocks)
window_decode_partials(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k_cache,
                       const unsigned short* __restrict__ v_cache, const int* __restrict__ row_pos,
                       const int* __restrict__ row_slot, float* __restrict__ part_m, float* __restrict__ part_l,
                       float* __restrict__ part_o, int win, int ring, int n_part, float scale, int kv_heads) {
  using T = wd::Traits<D, G>;
  constexpr int C = wd::kChunk;
  extern __shared__ __align__(16) unsigned char wd_smem[];
  int* key_row = reinterpret_cast<int*>(wd_smem);
  unsigned short* q_s = reinterpret_cast<unsigned short*>(wd_smem + wd::kKeyRowBytes);
  float* p_s = reinterpret_cast<float*>(wd_smem + wd::kKeyRowBytes + T::kQBytes);
  unsigned short* v_s = reinterpret_cast<unsigned short*>(wd_smem + wd::kKeyRowBytes + T::kQBytes + wd::kPBytes);
  float* red_s = reinterpret_cast<float*>(wd_smem);  // aliases the whole layout once PV is done

  const int j = blockIdx.x;  // partial slot of the row
  const int kh = blockIdx.y;  // key head
  const int b = blockIdx.z;  // row
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;

  unsigned dyn_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
  if (dyn_bytes != static_cast<unsigned>(T::kSmem)) __trap();  // the launch must give exactly the layout
  const wd::Span span = wd::row_span(row_pos[b], win);
  if (j >= span.count) return;  // block-uniform, before any barrier: the whole block leaves

  const int slot = row_slot[b];
  const int hq = kv_heads * G;
  const long long cbase = (static_cast<long long>(span.first / C) + j) * C;  // absolute position of chunk key 0
  const long long lo_abs = span.first > cbase ? span.first : cbase;
  const long long hi_abs = span.last < cbase + C - 1 ? span.last : cbase + C - 1;
  const int lo_rel = static_cast<int>(lo_abs - cbase);  // first visible chunk-relative key
  const int hi_rel = static_cast<int>(hi_abs - cbase);  // last visible chunk-relative key (< lo_rel: none)
  const int row_elems = kv_heads * D;  // elements between cache rows (offsets are 64-bit products)
  // Element offset of (slot, row 0, kh, dim 0) in either cache, in 64 bits.
  const size_t head_base = (static_cast<size_t>(slot) * static_cast<size_t>(ring) * kv_heads + kh) * D;

  // Setup: cache row of each chunk key (-1: masked, never loaded) and the block's queries in q_s.
  {
    const long long p = cbase + tid;
    const bool on = tid >= lo_rel && tid <= hi_rel;
    key_row[tid] = on ? static_cast<int>(p % ring) : -1;
  }
  constexpr int kQPieces = wd::kHeadSlots * D / 8;  // 16-byte pieces of q_s
  for (int e = tid; e < kQPieces; e += wd::kThreads) {
    const int g = e / (D / 8);
    const int piece = e % (D / 8);
    uint4 v = make_uint4(0u, 0u, 0u, 0u);  // heads >= G are zero rows
    if (g < G) {
      const size_t q_row = static_cast<size_t>(b) * hq + wd::q_head<G>(kh, g, kv_heads);
      v = __ldg(reinterpret_cast<const uint4*>(q + q_row * D) + piece);
    }
    reinterpret_cast<uint4*>(q_s)[e] = v;
  }
  __syncthreads();

  // V stages (cp.async into shared memory): stage st holds, for each PV key group kg, its chunk keys
  // kg * KPG + st * TK .. + TK - 1; the first kVStages - 1 stages load while the scores are computed.
  const int kg_n = T::kKG;             // PV key groups, fixed by the shape (never by the batch)
  const int kpg = C / kg_n;            // keys per PV key group
  const int tk = wd::kVKeys / kg_n;    // keys of each key group in one stage
  const int v_stages = kpg / tk;       // stages that cover the chunk
  auto issue_v = [&](int st) {
    unsigned short* dst = v_s + (st % wd::kVStages) * wd::kVKeys * D;
#pragma unroll
    for (int r = 0; r < T::kVPieces / wd::kThreads; ++r) {
      const int e = tid + wd::kThreads * r;
      const int k_in = e / (D / 8);  // key within the stage
      const int piece = e % (D / 8);  // 8 dims
      const int cr = key_row[(k_in / tk) * kpg + st * tk + k_in % tk];
      const unsigned short* src = cr >= 0 ? v_cache + head_base + static_cast<long long>(cr) * row_elems + 8 * piece
                                          : v_cache;  // masked keys: 16 zero bytes, nothing read
      wd::cp_async16(dst + k_in * D + 8 * piece, src, cr >= 0 ? 16u : 0u);
    }
  };
#pragma unroll
  for (int st = 0; st < wd::kVStages - 1; ++st) {
    if (st < v_stages) issue_v(st);
    wd::cp_async_commit();
  }

  // Scores on tensor cores: warp w takes m-tiles w and w + 8; A = 16 keys x 16 dims of K, B = Q^T (16 dims x 8 heads).
  {
    const int grp = lane >> 2;  // A row / B column / C row within the fragment
    const int t = lane & 3;     // 8-dim piece of a k-pair
    const unsigned short* k_lane = k_cache + head_base + 8 * t;
    int rows[2][2];  // [m-tile][A row grp, grp + 8]: cache row or -1
    bool active[2];  // m-tile has at least one visible key
#pragma unroll
    for (int tt = 0; tt < 2; ++tt) {
      const int key0 = (warp + wd::kWarps * tt) * wd::kTileKeys;
      active[tt] = key0 <= hi_rel && key0 + wd::kTileKeys - 1 >= lo_rel;
      rows[tt][0] = key_row[key0 + grp];
      rows[tt][1] = key_row[key0 + grp + 8];
    }
    // One 16-byte load of K[key][32 s + 8 t .. + 7]; masked keys load nothing and contribute zero.
    auto load_k = [&](int tt, int s, int h) -> uint4 {
      const int r = rows[tt][h];
      if (r < 0) return make_uint4(0u, 0u, 0u, 0u);
      return __ldg(reinterpret_cast<const uint4*>(k_lane + static_cast<long long>(r) * row_elems + 32 * s));
    };
    // Both m-tiles advance together with kKDepth k-pairs of each in flight: ring[stage][m-tile][A row half].
    uint4 ring[wd::kKDepth][2][2];
#pragma unroll
    for (int st = 0; st < wd::kKDepth; ++st) {
#pragma unroll
      for (int tt = 0; tt < 2; ++tt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) ring[st][tt][h] = st < T::kPairs ? load_k(tt, st, h) : make_uint4(0u, 0u, 0u, 0u);
      }
    }
    float acc[2][T::kNTiles][4];
#pragma unroll
    for (int tt = 0; tt < 2; ++tt) {
#pragma unroll
      for (int nt = 0; nt < T::kNTiles; ++nt) {
        acc[tt][nt][0] = acc[tt][nt][1] = acc[tt][nt][2] = acc[tt][nt][3] = 0.0f;  // each chain starts at +0.0f
      }
    }
#pragma unroll
    for (int s = 0; s < T::kPairs; ++s) {
      const uint4 (&cur)[2][2] = ring[s % wd::kKDepth];  // this k-pair of both m-tiles
#pragma unroll
      for (int nt = 0; nt < T::kNTiles; ++nt) {
        // B column = head 8 nt + grp: Q[head][32 s + 8 t .. + 7] as words {0..1, 2..3, 4..5, 6..7}.
        const uint4 qv = *reinterpret_cast<const uint4*>(q_s + (8 * nt + grp) * D + 32 * s + 8 * t);
#pragma unroll
        for (int tt = 0; tt < 2; ++tt) {
          if (active[tt]) {  // warp-uniform: m-tiles wholly outside the visible keys are skipped
            // Rounding: the tensor core's fp32 accumulate, one chain per (key, head) over the D / 16 k-steps.
            // k-step 2s: dims 32 s + 8 t + 0..3; A {row grp w0, row grp+8 w0, row grp w1, row grp+8 w1}.
            wd::mma_bf16(acc[tt][nt], cur[tt][0].x, cur[tt][1].x, cur[tt][0].y, cur[tt][1].y, qv.x, qv.y);
            // k-step 2s+1: dims 32 s + 8 t + 4..7; A {row grp w2, row grp+8 w2, row grp w3, row grp+8 w3}.
            wd::mma_bf16(acc[tt][nt], cur[tt][0].z, cur[tt][1].z, cur[tt][0].w, cur[tt][1].w, qv.z, qv.w);
          }
        }
      }
      if (s + wd::kKDepth < T::kPairs) {  // the stage just used takes k-pair s + kKDepth
#pragma unroll
        for (int tt = 0; tt < 2; ++tt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) ring[s % wd::kKDepth][tt][h] = load_k(tt, s + wd::kKDepth, h);
        }
      }
    }
    // C fragment: c0, c1 = (key grp, heads 8 nt + 2 t, +1); c2, c3 = (key grp + 8, same heads).
#pragma unroll
    for (int tt = 0; tt < 2; ++tt) {
      const int key0 = (warp + wd::kWarps * tt) * wd::kTileKeys;
#pragma unroll
      for (int nt = 0; nt < T::kNTiles; ++nt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool on = rows[tt][h] >= 0;
          float2 sv;
          sv.x = on ? __fmul_rn(acc[tt][nt][2 * h], scale) : wd::neg_inf();      // rounding: s = RN(acc * scale)
          sv.y = on ? __fmul_rn(acc[tt][nt][2 * h + 1], scale) : wd::neg_inf();  // masked keys score -inf
          *reinterpret_cast<float2*>(p_s + (key0 + grp + 8 * h) * wd::kPStride + 8 * nt + 2 * t) = sv;
        }
      }
    }
  }
  __syncthreads();  // every warp's score tiles are in p_s before any warp reads a head's column

  // Chunk maximum, probabilities and l: warp w takes heads w and w + 8; lane l owns keys l, l + 32, ...
#pragma unroll
  for (int gi = 0; gi < (G + wd::kWarps - 1) / wd::kWarps; ++gi) {
    const int g = warp + wd::kWarps * gi;
    if (g < G) {  // warp-uniform
      float sv[C / 32];
      float m = wd::neg_inf();
#pragma unroll
      for (int i = 0; i < C / 32; ++i) {
        sv[i] = p_s[(lane + 32 * i) * wd::kPStride + g];
        m = fmaxf(m, sv[i]);  // exact
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));  // exact
      float l = 0.0f;
#pragma unroll
      for (int i = 0; i < C / 32; ++i) {
        const float p = expf(__fsub_rn(sv[i], m));  // rounding: RN(s - m), then expf; masked keys give +0
        p_s[(lane + 32 * i) * wd::kPStride + g] = p;
        l = __fadd_rn(l, p);  // rounding: lane sum in increasing key order (+0 adds are exact)
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, off));  // rounding: butterfly, commutative
      }
      if (lane == 0) {
        const size_t idx = (static_cast<size_t>(b) * hq + wd::q_head<G>(kh, g, kv_heads)) * n_part + j;
        part_m[idx] = m;
        part_l[idx] = l;
      }
    }
  }
  // No barrier here: the V-stage loop's first barrier (st = 0, and v_stages >= 1) orders P before any PV read.

  // PV from the V stages: thread owns DT consecutive dims for all G heads; key group kg sums keys
  // [kg * KPG, (kg + 1) * KPG) in key order, TK of them per stage.
  constexpr int DT = T::kDT;
  const int kg = tid / T::kTPG;
  const int d0 = (tid % T::kTPG) * DT;
  float acc[G][DT];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int d = 0; d < DT; ++d) acc[g][d] = 0.0f;
  }
  for (int st = 0; st < v_stages; ++st) {
    wd::cp_async_wait<wd::kVStages - 2>();  // this thread's copies of stage st have landed
    __syncthreads();                         // everyone's have, and stage st - 1 is read by all
    if (st + wd::kVStages - 1 < v_stages) issue_v(st + wd::kVStages - 1);
    wd::cp_async_commit();
    if (kg < kg_n) {
      const unsigned short* v_stage = v_s + (st % wd::kVStages) * wd::kVKeys * D + kg * tk * D + d0;
      for (int i = 0; i < tk; ++i) {
        const float* p_row = p_s + (kg * kpg + st * tk + i) * wd::kPStride;  // p of the key for every head
        float p[G];
        if constexpr (G == 1) {
          p[0] = p_row[0];
        } else if constexpr (G == 2) {
          const float2 p2 = *reinterpret_cast<const float2*>(p_row);
          p[0] = p2.x;
          p[1] = p2.y;
        } else {
#pragma unroll
          for (int g4 = 0; g4 < G; g4 += 4) {
            const float4 p4 = *reinterpret_cast<const float4*>(p_row + g4);
            p[g4] = p4.x;
            if (g4 + 1 < G) p[g4 + 1] = p4.y;
            if (g4 + 2 < G) p[g4 + 2] = p4.z;
            if (g4 + 3 < G) p[g4 + 3] = p4.w;
          }
        }
        unsigned w[DT / 2];  // DT bf16 of V, packed in pairs
        if constexpr (DT == 8) {
          const uint4 x = *reinterpret_cast<const uint4*>(v_stage + i * D);
          w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
        } else if constexpr (DT == 4) {
          const uint2 x = *reinterpret_cast<const uint2*>(v_stage + i * D);
          w[0] = x.x, w[1] = x.y;
        } else {
          w[0] = *reinterpret_cast<const unsigned*>(v_stage + i * D);
        }
        float vf[DT];
#pragma unroll
        for (int k = 0; k < DT / 2; ++k) {
          vf[2 * k] = wd::bf16_lo(w[k]);
          vf[2 * k + 1] = wd::bf16_hi(w[k]);
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
          for (int d = 0; d < DT; ++d) {
            acc[g][d] = fmaf(p[g], vf[d], acc[g][d]);  // rounding: one fma per key, key order
          }
        }
      }
    }
  }
  wd::cp_async_wait<0>();  // nothing is in flight when red_s reuses the layout

  // o: the key groups' sums added in group order 0, 1, ..., kg_n - 1 (kg_n == 1: written from registers).
  if (kg_n == 1) {  // block-uniform
    if (kg == 0) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const size_t idx = ((static_cast<size_t>(b) * hq + wd::q_head<G>(kh, g, kv_heads)) * n_part + j) * D + d0;
#pragma unroll
        for (int d = 0; d < DT; d += 2) {
          *reinterpret_cast<float2*>(part_o + idx + d) = make_float2(acc[g][d], acc[g][d + 1]);
        }
      }
    }
  } else {
    __syncthreads();  // every thread is done with key_row, q_s and p_s: red_s reuses them
    if (kg < kg_n) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int d = 0; d < DT; d += 2) {
          *reinterpret_cast<float2*>(red_s + (kg * G + g) * D + d0 + d) = make_float2(acc[g][d], acc[g][d + 1]);
        }
      }
    }
    __syncthreads();
    for (int e = tid; e < G * D; e += wd::kThreads) {
      const int g = e / D;
      const int d = e % D;
      float o = red_s[e];
      for (int k = 1; k < kg_n; ++k) o = __fadd_rn(o, red_s[k * G * D + e]);  // rounding: group order
      const size_t idx = ((static_cast<size_t>(b) * hq + wd::q_head<G>(kh, g, kv_heads)) * n_part + j) * D + d;
      part_o[idx] = o;
    }
  }
}

template <int D, int G>
__global__ void __launch_bounds__(wd::kMergeThreads)
window_decode_merge(const float* __restrict__ part_m, const float* __restrict__ part_l,
                    const float* __restrict__ part_o, const int* __restrict__ row_pos,
                    unsigned short* __restrict__ out, int win, int n_part, int kv_heads) {
  using T = wd::Traits<D, G>;
  constexpr int DL = T::kMergeLaneDims;  // dims per lane: float4 pieces 4 l + 128 i
  __shared__ float warp_max[wd::kMergeWarps];
  __shared__ float warp_l[wd::kMergeWarps];
  __shared__ __align__(16) float warp_o[wd::kMergeWarps][D];
  const int h = blockIdx.x;  // query head
  const int b = blockIdx.y;  // row
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int hq = kv_heads * G;
  const wd::Span span = wd::row_span(row_pos[b], win);
  // Slots past the row's count are never read, nor past the n_part slots the caller allocated.
  const int count = min(span.count, n_part);
  const size_t row = static_cast<size_t>(b) * hq + h;
  const float* m_row = part_m + row * n_part;
  const float* l_row = part_l + row * n_part;
  const float* o_row = part_o + row * n_part * D;

  // M = max_c m_c (exact, any order).
  float big_m = wd::neg_inf();
  for (int c = tid; c < count; c += wd::kMergeThreads) big_m = fmaxf(big_m, m_row[c]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) big_m = fmaxf(big_m, __shfl_xor_sync(0xffffffffu, big_m, off));
  if (lane == 0) warp_max[warp] = big_m;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < wd::kMergeWarps; ++w) big_m = fmaxf(big_m, warp_max[w]);

  float l = 0.0f;
  float o[DL];
#pragma unroll
  for (int i = 0; i < DL; ++i) o[i] = 0.0f;
  // Warp w sums the chunks [w * per, (w + 1) * per) in chunk order: L = fma(f_c, l_c, L), O = fma(f_c, o_c, O)
  // from 0.0f; the warps' sums are then added in warp order. The split follows the row's own chunk count only.
  // A warp loads kBatch chunks (their m, l and its lanes' o) before it adds the first of them, so that many
  // loads are in flight; a batch past the run's end loads and adds nothing there.
  constexpr int kBatch = D <= 256 ? 8 : 4;
  const int per = (count + wd::kMergeWarps - 1) / wd::kMergeWarps;
  const int c_end = min(count, (warp + 1) * per);
  for (int c0 = warp * per; c0 < c_end; c0 += kBatch) {
    float m_c[kBatch], l_c[kBatch];
    float4 o_c[kBatch][DL / 4];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int c = c0 + u;
      if (c < c_end) {  // warp-uniform
        m_c[u] = m_row[c];
        l_c[u] = l_row[c];
#pragma unroll
        for (int i = 0; i < DL / 4; ++i)
          o_c[u][i] = *reinterpret_cast<const float4*>(o_row + static_cast<size_t>(c) * D + 4 * lane + 128 * i);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (c0 + u < c_end) {  // warp-uniform: the chunks in chunk order, as one at a time
        const float f = expf(m_c[u] - big_m);  // rounding: RN(m_c - M), then expf
        l = fmaf(f, l_c[u], l);                // rounding: one fma per chunk
#pragma unroll
        for (int i = 0; i < DL / 4; ++i) {
          o[4 * i] = fmaf(f, o_c[u][i].x, o[4 * i]);  // rounding: one fma per chunk
          o[4 * i + 1] = fmaf(f, o_c[u][i].y, o[4 * i + 1]);
          o[4 * i + 2] = fmaf(f, o_c[u][i].z, o[4 * i + 2]);
          o[4 * i + 3] = fmaf(f, o_c[u][i].w, o[4 * i + 3]);
        }
      }
    }
  }
  if (lane == 0) warp_l[warp] = l;
#pragma unroll
  for (int i = 0; i < DL / 4; ++i) {
    *reinterpret_cast<float4*>(&warp_o[warp][4 * lane + 128 * i]) = make_float4(o[4 * i], o[4 * i + 1],
                                                                               o[4 * i + 2], o[4 * i + 3]);
  }
  __syncthreads();
  float big_l = warp_l[0];
#pragma unroll
  for (int w = 1; w < wd::kMergeWarps; ++w) big_l = __fadd_rn(big_l, warp_l[w]);  // rounding: warp order
  for (int d = tid; d < D; d += wd::kMergeThreads) {
    float big_o = warp_o[0][d];
#pragma unroll
    for (int w = 1; w < wd::kMergeWarps; ++w) big_o = __fadd_rn(big_o, warp_o[w][d]);  // rounding: warp order
    const float y = big_o / big_l;  // rounding: IEEE division (-prec-div=true)
    out[row * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(y));  // rounding: to bf16
  }
}
