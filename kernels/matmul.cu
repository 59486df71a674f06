// Token rows against weight rows on warpgroup tensor cores (sm_90a): out = a b^T with a [M, K] and b [N, K] bf16
// (K contiguous), fp32 accumulation, out [M, N] in bf16 (RN-even, OUT_BF16 = 1) or fp32. One tiling for every M: a
// block takes a 128 x BN tile of out over one of SPLIT contiguous pieces of K, cut by K and SPLIT alone, and the
// SPLIT blocks of a tile form one thread-block cluster that adds their pieces in a fixed order. No choice depends on
// M, so a row's bits do not depend on the batch it is in or its slot there.
//
// Launch geometry: grid (ceil(N / BN), ceil(M / 128), SPLIT) in clusters of (1, 1, SPLIT), blocks mapped to tiles
// in groups of 16 row tiles (tile_index); 384 threads: a producer warpgroup, one thread of which feeds mm::kStages
// shared-memory stages through the tensor copy engine, and two consumer warpgroups of 64 rows each;
// mm::kSmemBytes<BN> bytes of dynamic shared memory. a_map and b_map: tensor maps of a and b (bf16, 2D, K
// innermost) with boxes of 64 x 128 and 64 x BN elements and the 128-byte swizzle. K and N multiples of 8. Off
// sm_90a it traps.
//
// The order, per output (docs/kernel-contract.md 10):
//   piece p of SPLIT takes k tiles [p T, min((p + 1) T, KT)), KT = ceil(K / 64), T = ceil(KT / SPLIT);
//   P_p = wgmma k-steps over K elements 16 s .. 16 s + 15 of the piece in increasing order from P_p = 0 (elements
//         past K are zeros; an empty piece is 0);
//   out = RN_out(((P_0 + P_1) + P_2) + ...), each addition fp32 RN.
#include <cuda_bf16.h>
#include "tma.cuh"
#include "wgmma.cuh"

namespace mm {

constexpr int kTileM = 128;         // rows of out per block: two consumer warpgroups of 64
constexpr int kTileK = 64;          // K per stage: one 128-byte swizzled row of bf16 per tile row
constexpr int kStages = 4;          // shared-memory stages in flight
constexpr int kGroupM = 16;         // row tiles walked together, so resident blocks share rows of a and b in L2
constexpr int kThreads = 384;       // a producer warpgroup and two consumer warpgroups
constexpr int kConsumerWarps = 8;   // arrivals that free a stage
constexpr int kMultiple = 8;        // K and N: 16-byte rows for the tensor maps and the vector stores
constexpr int kAlign = 1024;        // the 128-byte swizzle repeats every 8 rows of 128 bytes
constexpr int kSwizzleSbo = 1024;   // descriptor stride between 8-row groups of a K-major swizzled tile
constexpr int kSwizzleLbo = 16;     // unused by a swizzled K-major tile; one 16-byte unit by convention
constexpr int kKStepBytes = 32;     // a k-step's 16 bf16 along one 128-byte row
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;

template <int BN>
constexpr int kStageBytes = (kTileM + BN) * kTileK * 2;  // a's 128 rows, then b's BN rows, 128 bytes each
template <int BN>
constexpr int kPitch = BN + 8;  // floats per row of the fp32 tile that pieces are added from (8: fewer bank clashes)
template <int BN>
constexpr int kTileBytes = kTileM * kPitch<BN> * 4;
template <int BN>
constexpr int kDataBytes = kStages * kStageBytes<BN> > kTileBytes<BN> ? kStages * kStageBytes<BN> : kTileBytes<BN>;
template <int BN>
constexpr int kSmemBytes = kAlign + kDataBytes<BN> + 2 * kStages * 8;  // alignment slack, data, the mbarriers

static_assert(kTileK * 2 == 128, "a k tile is one 128-byte swizzle row");
static_assert(kStages >= 2, "the producer refills one stage while the consumers read another");

// What kcontract reads back from the cubin (contract.yaml `exports`).
__constant__ const int kExportThreads = kThreads;
__constant__ const int kExportTileM = kTileM;
__constant__ const int kExportTileK = kTileK;
__constant__ const int kExportMultiple = kMultiple;
template <int BN>
__constant__ const int kExportTileN = BN;
template <int BN>
__constant__ const int kExportSmemBytes =  // the launch's dynamic shared memory on this SM:
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030 || \
                               __CUDA_ARCH__ == 1100)
    +kSmemBytes<BN>;  // SMs of 227 KB opt-in shared memory per block
#else
    0;  // elsewhere none, as the contract launches it (the kernel traps off sm_90a)
#endif

// d += A B over one k tile: the four k-steps along K in increasing order.
template <int BN>
__device__ __forceinline__ void ktile(float (&d)[BN / 2], unsigned long long a, unsigned long long b) {
#pragma unroll
  for (int s = 0; s < kTileK / 16; ++s) {
    const unsigned long long step = (s * kKStepBytes) >> 4;  // descriptors count 16-byte units
    if constexpr (BN == 256) {
      wg::ss_n256(d, a + step, b + step);
    } else {
      wg::ss_n128(d, a + step, b + step);
    }
  }
}

// The output tile of this block: the grid's tiles in groups of kGroupM row tiles, consecutive blocks walking a
// group's row tiles first and then its column tiles. This decides which block computes a tile, never how.
struct TileIndex {
  int m, n;
};

__device__ __forceinline__ TileIndex tile_index() {
  const int tiles_n = gridDim.x, tiles_m = gridDim.y;
  const int id = blockIdx.y * tiles_n + blockIdx.x, per_group = kGroupM * tiles_n;
  const int first_m = (id / per_group) * kGroupM, rows = min(tiles_m - first_m, kGroupM), at = id % per_group;
  return {first_m + at % rows, at / rows};
}

// The k tiles of piece p: [first, last).
struct Piece {
  int first, last;
};

template <int SPLIT>
__device__ __forceinline__ Piece piece_of(int k, int p) {
  const int tiles = (k + kTileK - 1) / kTileK;
  const int per = (tiles + SPLIT - 1) / SPLIT;
  const int first = min(tiles, p * per);
  return {first, min(tiles, first + per)};
}

// Producer: one thread loads each k tile's a and b boxes into stage kt % kStages once the consumers freed it.
template <int BN>
__device__ __forceinline__ void produce(unsigned char* data, unsigned long long* full, unsigned long long* empty,
                                        const tma::TensorMap* a_map, const tma::TensorMap* b_map, Piece piece,
                                        int m0, int n0) {
  tma::prefetch(a_map);
  tma::prefetch(b_map);
  for (int kt = piece.first; kt < piece.last; ++kt) {
    const int i = kt - piece.first, stage = i % kStages;
    if (i >= kStages) tma::wait(&empty[stage], ((i / kStages) - 1) & 1);
    unsigned char* a_s = data + stage * kStageBytes<BN>;
    tma::arrive_expect(&full[stage], kStageBytes<BN>);
    tma::load_2d(a_s, a_map, kt * kTileK, m0, &full[stage]);
    tma::load_2d(a_s + kTileM * kTileK * 2, b_map, kt * kTileK, n0, &full[stage]);
  }
}

// Consumer warpgroup c: rows 64 c .. 64 c + 63 of the tile, chained over the piece's k tiles in order.
template <int BN>
__device__ __forceinline__ void consume(float (&d)[BN / 2], unsigned char* data, unsigned long long* full,
                                        unsigned long long* empty, Piece piece, int c) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
  const int lane = threadIdx.x % 32;
  for (int kt = piece.first; kt < piece.last; ++kt) {
    const int i = kt - piece.first, stage = i % kStages;
    tma::wait(&full[stage], (i / kStages) & 1);
    unsigned char* a_s = data + stage * kStageBytes<BN>;
    const unsigned long long a = wg::smem_desc(a_s + c * 64 * 128, kSwizzleLbo, kSwizzleSbo, 1);
    const unsigned long long b = wg::smem_desc(a_s + kTileM * kTileK * 2, kSwizzleLbo, kSwizzleSbo, 1);
    wg::fence();
    ktile<BN>(d, a, b);
    wg::commit();
    wg::wait<1>();  // the previous k tile's k-steps are done: its stage is free
    if (i > 0 && lane == 0) tma::arrive(&empty[(i - 1) % kStages]);
  }
  wg::wait0();
}

// This thread's accumulators into the block's fp32 tile (row-major, kPitch floats per row).
template <int BN>
__device__ __forceinline__ void stash(float* tile, const float (&d)[BN / 2], int c) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row = 64 * c + 16 * warp + lane / 4, col = 2 * (lane % 4);
#pragma unroll
  for (int t = 0; t < BN / 8; ++t) {
    *reinterpret_cast<float2*>(tile + row * kPitch<BN> + 8 * t + col) = make_float2(d[4 * t], d[4 * t + 1]);
    *reinterpret_cast<float2*>(tile + (row + 8) * kPitch<BN> + 8 * t + col) = make_float2(d[4 * t + 2], d[4 * t + 3]);
  }
}

__device__ __forceinline__ void store4(unsigned short* out, float4 v) {
  ushort4 bits;
  bits.x = __bfloat16_as_ushort(__float2bfloat16_rn(v.x));
  bits.y = __bfloat16_as_ushort(__float2bfloat16_rn(v.y));
  bits.z = __bfloat16_as_ushort(__float2bfloat16_rn(v.z));
  bits.w = __bfloat16_as_ushort(__float2bfloat16_rn(v.w));
  *reinterpret_cast<ushort4*>(out) = bits;
}

__device__ __forceinline__ void store4(float* out, float4 v) { *reinterpret_cast<float4*>(out) = v; }

__device__ __forceinline__ float4 add4(float4 a, float4 b) {  // fp32 RN, lane by lane
  return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w));
}

// Rows [row0, row1) of the tile: the pieces' fp32 tiles added in order 0 .. SPLIT - 1 (each in block p of the
// cluster), then written to out. A thread reads kBatch quads of every piece before its first addition, so that
// many distributed shared-memory reads are in flight at once.
template <int BN, int SPLIT, typename Out>
__device__ __forceinline__ void write_rows(const float* tile, Out* out, int row0, int row1, int m0, int n0, int m,
                                           int n) {
  constexpr int kQuads = BN / 4, kBatch = SPLIT >= 4 ? 2 : 8 / SPLIT;
  const int last = row1 * kQuads;
  for (int q0 = threadIdx.x + row0 * kQuads; q0 < last; q0 += kBatch * kThreads) {
    float4 part[kBatch][SPLIT];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int q = min(q0 + u * kThreads, last - 1);
      const float* at = tile + (q / kQuads) * kPitch<BN> + 4 * (q % kQuads);
#pragma unroll
      for (int p = 0; p < SPLIT; ++p)
        part[u][p] = SPLIT > 1 ? tma::load_cluster(at, p) : *reinterpret_cast<const float4*>(at);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int q = q0 + u * kThreads, row = q / kQuads, col = 4 * (q % kQuads);
      float4 sum = part[u][0];
#pragma unroll
      for (int p = 1; p < SPLIT; ++p) sum = add4(sum, part[u][p]);
      if (q < last && m0 + row < m && n0 + col < n) store4(out + size_t(m0 + row) * size_t(n) + n0 + col, sum);
    }
  }
}

template <int BN, int SPLIT, typename Out>
__device__ __forceinline__ void tile(const tma::TensorMap* a_map, const tma::TensorMap* b_map, Out* out, int m,
                                     int n, int k) {
  extern __shared__ unsigned char raw[];
  unsigned char* data = raw + (kAlign - tma::smem_addr(raw) % kAlign) % kAlign;  // offsets from raw stay shared
  unsigned long long* full = reinterpret_cast<unsigned long long*>(data + kDataBytes<BN>);
  unsigned long long* empty = full + kStages;
  const int group = threadIdx.x / 128;
  const TileIndex at = tile_index();
  const int n0 = at.n * BN, m0 = at.m * kTileM, p = blockIdx.z;
  const Piece piece = piece_of<SPLIT>(k, p);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::barrier_init(&full[s], 1);
      tma::barrier_init(&empty[s], kConsumerWarps);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  float d[BN / 2];
  if (group == 0) {
    if (threadIdx.x == 0) produce<BN>(data, full, empty, a_map, b_map, piece, m0, n0);
  } else {
    consume<BN>(d, data, full, empty, piece, group - 1);
  }
  __syncthreads();  // every k-step is done: the stages become the fp32 tile
  float* sums = reinterpret_cast<float*>(data);
  if (group > 0) stash<BN>(sums, d, group - 1);
  if (SPLIT > 1) {
    tma::cluster_sync();  // every piece's tile is in its block's shared memory; block p adds up its share of rows
    write_rows<BN, SPLIT>(sums, out, p * kTileM / SPLIT, (p + 1) * kTileM / SPLIT, m0, n0, m, n);
    tma::cluster_sync();  // no block leaves while another still reads its tile
  } else {
    __syncthreads();
    write_rows<BN, SPLIT>(sums, out, 0, kTileM, m0, n0, m, n);
  }
}

}  // namespace mm

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MM_CLUSTER(split) __cluster_dims__(1, 1, split)  // the pieces of a tile, one cluster
#else
#define MM_CLUSTER(split)  // no clusters before sm_90 (the kernel traps there)
#endif

// a_map, b_map: a [m, k] and b [n, k]; out [m, n] bf16 bits (OUT_BF16) or fp32.
template <int BN, int SPLIT, int OUT_BF16>
MM_CLUSTER(SPLIT) __global__ void __launch_bounds__(mm::kThreads, 1)
    matmul(const __grid_constant__ tma::TensorMap a_map, const __grid_constant__ tma::TensorMap b_map, void* out,
           int m, int n, int k) {
  static_assert(BN == 128 || BN == 256, "tiles of 128 or 256 columns (one wgmma's N)");
  static_assert(SPLIT >= 1 && SPLIT <= 8, "clusters of at most 8 blocks");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (OUT_BF16) {
    mm::tile<BN, SPLIT>(&a_map, &b_map, static_cast<unsigned short*>(out), m, n, k);
  } else {
    mm::tile<BN, SPLIT>(&a_map, &b_map, static_cast<float*>(out), m, n, k);
  }
#else
  __trap();
#endif
}
