// Token rows against weight rows on warpgroup tensor cores (sm_90a): out = a b^T with a [M, K] and b [N, K] bf16
// (K contiguous), fp32 accumulation, out [M, N] in bf16 (RN-even, OUT_BF16 = 1) or fp32. K is cut into SPLIT
// contiguous pieces by K and SPLIT alone, and every output is the same sum of the same pieces whatever tile
// computes it, so a row's bits do not depend on M, on the batch it is in or on its slot there, and a caller may
// choose the tile from M. A block takes a BM x BN tile of out (BM 8, 64 or 128; BN 64, 128, 192 or 256, BN 16 or
// 32 at BM 8 or 64, and BN 48 at BM 8) over one piece; the SPLIT blocks of a tile form one thread-block cluster
// that adds their pieces in a fixed order. Narrow tiles keep Tile::kBlocks blocks on an SM, so that few rows still
// stream the weights from enough blocks to keep every SM's loads in flight; an 8-row tile keeps a's 8 rows once per
// stage (wgmma reads them as each of its eight 8-row groups), so its stages hold almost only weights.
//
// Launch geometry: grid (ceil(N / BN), ceil(M / BM), SPLIT) in clusters of (1, 1, SPLIT), blocks mapped to tiles
// in groups of 16 row tiles (tile_index); 384 threads: a producer warpgroup, one thread of which feeds
// Tile::kStages shared-memory stages through the tensor copy engine, and two consumer warpgroups (BM 128: 64 rows
// each; BM 8 or 64: BN / 2 columns each); Tile::kSmemBytes bytes of dynamic shared memory.
// a_map and b_map: tensor maps of a and b (bf16, 2D, K innermost) with boxes of 64 x min(BM, m) and 64 x BN
// elements and the 128-byte swizzle (a call of fewer rows than a tile loads only its own rows of a). K and N
// multiples of 8. Off sm_90a it traps.
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

constexpr int kTileK = 64;          // K per stage: one 128-byte swizzled row of bf16 per tile row
constexpr int kGroupM = 16;         // row tiles walked together, so resident blocks share rows of a and b in L2
constexpr int kThreads = 384;       // a producer warpgroup and two consumer warpgroups
constexpr int kConsumerWarps = 8;   // arrivals that free a stage
constexpr int kWarpgroupRows = 64;  // one wgmma's M
constexpr int kMultiple = 8;        // K and N: 16-byte rows for the tensor maps and the vector stores
constexpr int kAlign = 1024;        // the 128-byte swizzle repeats every 8 rows of 128 bytes
constexpr int kSwizzleSbo = 1024;   // descriptor stride between 8-row groups of a K-major swizzled tile
constexpr int kSwizzleLbo = 16;     // unused by a swizzled K-major tile; one 16-byte unit by convention
constexpr int kKStepBytes = 32;     // a k-step's 16 bf16 along one 128-byte row
constexpr int kRowBytes = kTileK * 2;  // one tile row of a stage
constexpr int kSmemLimit = 227 * 1024;  // opt-in dynamic shared memory per block on sm_90
constexpr int kSmemPerSm = 228 * 1024;  // shared memory per SM on sm_90, of which the system keeps 1 KB per block
constexpr int kSmemReserved = 1024;
constexpr int kMaxStages = 16;    // barriers reserved per block; a tile of 64 or 128 rows takes at most 8 stages

// The layout of a BM x BN tile: each consumer warpgroup's wgmma, the stages, the fp32 tile pieces are added from.
template <int BM, int BN>
struct Tile {
  static_assert(BM == 8 || BM == 64 || BM == 128, "tiles of 8, 64 or 128 rows");
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256 || (BM <= 64 && (BN == 16 || BN == 32)) || BN == 48,
                "tiles of 64, 128, 192 or 256 columns, 8- and 64-row tiles of 16 or 32, or 8-row tiles of 48");
  static_assert(BM != 8 || BN <= 128, "8-row tiles of at most 128 columns");
  static_assert(BN != 48 || BM == 8, "48 columns only in 8-row tiles");
  static constexpr int kCols = BM == 128 ? BN : BN / 2;  // columns of one consumer warpgroup (its wgmma's N)
  static constexpr int kSbo = BM == 8 ? 0 : kSwizzleSbo;  // 8 rows: every 8-row group of wgmma's 64 reads the same
  static constexpr int kAcc = kCols / 2;                  // fp32 accumulators per consumer thread
  static_assert(kCols == 8 || kCols == 16 || kCols == 24 || kCols == 32 || kCols == 64 || kCols == 128 ||
                    kCols == 192 || kCols == 256,
                "a warpgroup's columns are one wgmma's N: 64-row tiles of 16, 32, 64, 128 or 256 columns");
  static constexpr int kBlocks = BN == 16 ? 3 : BN == 32 ? 2 : 1;  // blocks resident on one SM
  static constexpr int kStageBytes = (BM + BN) * kRowBytes;  // a's BM rows, then b's BN rows
  static constexpr int kBarrierBytes = 2 * kMaxStages * 8;
  static constexpr int kBlockSmem = kSmemPerSm / kBlocks - kSmemReserved < kSmemLimit
                                        ? kSmemPerSm / kBlocks - kSmemReserved
                                        : kSmemLimit;  // shared memory one of kBlocks blocks may take
  static constexpr int kStagesFit = (kBlockSmem - kAlign - kBarrierBytes) / kStageBytes;
  static constexpr int kStageCap = BM == 8 ? kMaxStages : 8;  // an 8-row tile's stages hold almost only weights
  static constexpr int kStages = kStagesFit < kStageCap ? kStagesFit : kStageCap;  // stages in flight
  static constexpr int kPitch = BN + 8;  // floats per row of the fp32 tile pieces are added from (fewer bank clashes)
  static constexpr int kSumBytes = BM * kPitch * 4;
  static constexpr int kDataBytes = kStages * kStageBytes > kSumBytes ? kStages * kStageBytes : kSumBytes;
  static constexpr int kSmemBytes = kAlign + kDataBytes + 2 * kStages * 8;  // alignment slack, data, mbarriers
  static_assert(kStages >= 2, "the producer refills one stage while the consumers read another");
  static_assert(kSmemBytes <= kBlockSmem, "kBlocks blocks' shared memory fits one SM of sm_90");
};

static_assert(kTileK * 2 == 128, "a k tile is one 128-byte swizzle row");

// What kcontract reads back from the cubin (contract.yaml `exports`).
__constant__ const int kExportThreads = kThreads;
__constant__ const int kExportTileK = kTileK;
__constant__ const int kExportMultiple = kMultiple;
template <int BM>
__constant__ const int kExportTileM = BM;
template <int BN>
__constant__ const int kExportTileN = BN;
template <int BM, int BN>
__constant__ const int kExportSmemBytes =  // the launch's dynamic shared memory on this SM:
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030 || \
                               __CUDA_ARCH__ == 1100)
    +Tile<BM, BN>::kSmemBytes;  // SMs of 227 KB opt-in shared memory per block
#else
    0;  // elsewhere none, as the contract launches it (the kernel traps off sm_90a)
#endif

// d += A B: A (64 x 16) and B (16 x 24) from shared memory, both K-major (a consumer's half of 48 columns).
__device__ __forceinline__ void ss_n24(float (&d)[12], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\nwgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, %12, %13, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
      : "l"(a), "l"(b), "n"(1));
}

// d += A B over one k tile: the four k-steps along K in increasing order.
template <int N>
__device__ __forceinline__ void ktile(float (&d)[N / 2], unsigned long long a, unsigned long long b) {
#pragma unroll
  for (int s = 0; s < kTileK / 16; ++s) {
    const unsigned long long step = (s * kKStepBytes) >> 4;  // descriptors count 16-byte units
    if constexpr (N == 256) {
      wg::ss_n256(d, a + step, b + step);
    } else if constexpr (N == 192) {
      wg::ss_n192(d, a + step, b + step);
    } else if constexpr (N == 128) {
      wg::ss_n128(d, a + step, b + step);
    } else if constexpr (N == 64) {
      wg::ss_n64(d, a + step, b + step);
    } else if constexpr (N == 32) {
      wg::ss_n32(d, a + step, b + step);
    } else if constexpr (N == 24) {
      ss_n24(d, a + step, b + step);
    } else if constexpr (N == 16) {
      wg::ss_n16(d, a + step, b + step);
    } else {
      wg::ss_n8(d, a + step, b + step);
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

// Producer: one thread loads each k tile's a and b boxes into stage i % kStages once the consumers freed it.
template <int BM, int BN>
__device__ __forceinline__ void produce(unsigned char* data, unsigned long long* full, unsigned long long* empty,
                                        const tma::TensorMap* a_map, const tma::TensorMap* b_map, Piece piece,
                                        int m0, int n0, int a_rows) {
  using T = Tile<BM, BN>;
  tma::prefetch(a_map);
  tma::prefetch(b_map);
  for (int kt = piece.first; kt < piece.last; ++kt) {
    const int i = kt - piece.first, stage = i % T::kStages;
    if (i >= T::kStages) tma::wait(&empty[stage], ((i / T::kStages) - 1) & 1);
    unsigned char* a_s = data + stage * T::kStageBytes;
    tma::arrive_expect(&full[stage], (a_rows + BN) * kRowBytes);
    tma::load_2d(a_s, a_map, kt * kTileK, m0, &full[stage]);
    tma::load_2d(a_s + BM * kRowBytes, b_map, kt * kTileK, n0, &full[stage]);
  }
}

// Rows [a_rows, BM) of a in every stage, which a's box never writes: zeros, visible to wgmma's reads.
template <int BM, int BN>
__device__ __forceinline__ void clear_rows(unsigned char* data, int a_rows) {
  using T = Tile<BM, BN>;
  const int per_stage = (BM - a_rows) * kRowBytes / 16;
  for (int i = threadIdx.x; i < T::kStages * per_stage; i += kThreads) {
    unsigned char* at = data + (i / per_stage) * T::kStageBytes + a_rows * kRowBytes + 16 * (i % per_stage);
    *reinterpret_cast<uint4*>(at) = make_uint4(0, 0, 0, 0);
  }
  wg::fence_async_shared();
}

// Consumer warpgroup c: d = its share of the piece's tile, k-steps chained over the piece's k tiles in order from
// zero.
template <int BM, int BN>
__device__ __forceinline__ void consume(float (&d)[Tile<BM, BN>::kAcc], unsigned char* data,
                                        unsigned long long* full, unsigned long long* empty, Piece piece, int c) {
  using T = Tile<BM, BN>;
#pragma unroll
  for (int j = 0; j < T::kAcc; ++j) d[j] = 0.0f;
  const int lane = threadIdx.x % 32, a_row = BM == 128 ? c * kWarpgroupRows : 0, b_row = BM == 128 ? 0 : c * T::kCols;
  for (int kt = piece.first; kt < piece.last; ++kt) {
    const int i = kt - piece.first, stage = i % T::kStages;
    tma::wait(&full[stage], (i / T::kStages) & 1);
    unsigned char* a_s = data + stage * T::kStageBytes;
    const unsigned long long a = wg::smem_desc(a_s + a_row * kRowBytes, kSwizzleLbo, T::kSbo, 1);
    const unsigned long long b = wg::smem_desc(a_s + (BM + b_row) * kRowBytes, kSwizzleLbo, kSwizzleSbo, 1);
    wg::fence();
    ktile<T::kCols>(d, a, b);
    wg::commit();
    wg::wait<1>();  // the previous k tile's k-steps are done: its stage is free
    if (i > 0 && lane == 0) tma::arrive(&empty[(i - 1) % T::kStages]);
  }
  wg::wait0();
}

// This thread's accumulators into the block's fp32 tile (row-major, kPitch floats per row).
template <int BM, int BN>
__device__ __forceinline__ void stash(float* tile, const float (&d)[Tile<BM, BN>::kAcc], int c) {
  using T = Tile<BM, BN>;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row = (BM == 128 ? kWarpgroupRows * c : 0) + 16 * warp + lane / 4;
  const int col = (BM == 128 ? 0 : T::kCols * c) + 2 * (lane % 4);
  if (BM == 8 && warp > 0) return;  // 8 rows: warp 0's first 8 rows are the tile, the rest repeat them
#pragma unroll
  for (int t = 0; t < T::kCols / 8; ++t) {
    *reinterpret_cast<float2*>(tile + row * T::kPitch + 8 * t + col) = make_float2(d[4 * t], d[4 * t + 1]);
    if (BM > 8)
      *reinterpret_cast<float2*>(tile + (row + 8) * T::kPitch + 8 * t + col) = make_float2(d[4 * t + 2], d[4 * t + 3]);
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
template <int BM, int BN, int SPLIT, typename Out>
__device__ __forceinline__ void write_rows(const float* tile, Out* out, int row0, int row1, int m0, int n0, int m,
                                           int n) {
  using T = Tile<BM, BN>;
  constexpr int kQuads = BN / 4, kBatch = SPLIT >= 4 ? 2 : 8 / SPLIT;
  const int last = row1 * kQuads;
  for (int q0 = threadIdx.x + row0 * kQuads; q0 < last; q0 += kBatch * kThreads) {
    float4 part[kBatch][SPLIT];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int q = min(q0 + u * kThreads, last - 1);
      const float* at = tile + (q / kQuads) * T::kPitch + 4 * (q % kQuads);
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

template <int BM, int BN, int SPLIT, typename Out>
__device__ __forceinline__ void tile(const tma::TensorMap* a_map, const tma::TensorMap* b_map, Out* out, int m,
                                     int n, int k) {
  using T = Tile<BM, BN>;
  extern __shared__ unsigned char raw[];
  unsigned char* data = raw + (kAlign - tma::smem_addr(raw) % kAlign) % kAlign;  // offsets from raw stay shared
  unsigned long long* full = reinterpret_cast<unsigned long long*>(data + T::kDataBytes);
  unsigned long long* empty = full + T::kStages;
  const int group = threadIdx.x / 128;
  const TileIndex at = tile_index();
  const int n0 = at.n * BN, m0 = at.m * BM, p = blockIdx.z;
  const Piece piece = piece_of<SPLIT>(k, p);
  const int a_rows = min(BM, m);  // rows of a's box: fewer than BM only where the call has one row tile
  if (a_rows < BM) clear_rows<BM, BN>(data, a_rows);
  if (threadIdx.x == 0) {
    for (int s = 0; s < T::kStages; ++s) {
      tma::barrier_init(&full[s], 1);
      tma::barrier_init(&empty[s], kConsumerWarps);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  float d[T::kAcc];
  if (group == 0) {
    if (threadIdx.x == 0) produce<BM, BN>(data, full, empty, a_map, b_map, piece, m0, n0, a_rows);
  } else {
    consume<BM, BN>(d, data, full, empty, piece, group - 1);
  }
  __syncthreads();  // every k-step is done: the stages become the fp32 tile
  float* sums = reinterpret_cast<float*>(data);
  if (group > 0) stash<BM, BN>(sums, d, group - 1);
  if (SPLIT > 1) {
    tma::cluster_sync();  // every piece's tile is in its block's shared memory; block p adds up its share of rows
    write_rows<BM, BN, SPLIT>(sums, out, p * BM / SPLIT, (p + 1) * BM / SPLIT, m0, n0, m, n);
    tma::cluster_sync();  // no block leaves while another still reads its tile
  } else {
    __syncthreads();
    write_rows<BM, BN, SPLIT>(sums, out, 0, BM, m0, n0, m, n);
  }
}

}  // namespace mm

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MM_CLUSTER(split) __cluster_dims__(1, 1, split)  // the pieces of a tile, one cluster
#else
#define MM_CLUSTER(split)  // no clusters before sm_90 (the kernel traps there)
#endif

// a_map, b_map: a [m, k] and b [n, k]; out [m, n] bf16 bits (OUT_BF16) or fp32.
template <int BM, int BN, int SPLIT, int OUT_BF16>
MM_CLUSTER(SPLIT) __global__ void __launch_bounds__(mm::kThreads, mm::Tile<BM, BN>::kBlocks)
    matmul(const __grid_constant__ tma::TensorMap a_map, const __grid_constant__ tma::TensorMap b_map, void* out,
           int m, int n, int k) {
  static_assert(SPLIT >= 1 && SPLIT <= 8, "clusters of at most 8 blocks");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (OUT_BF16) {
    mm::tile<BM, BN, SPLIT>(&a_map, &b_map, static_cast<unsigned short*>(out), m, n, k);
  } else {
    mm::tile<BM, BN, SPLIT>(&a_map, &b_map, static_cast<float*>(out), m, n, k);
  }
#else
  __trap();
#endif
}
