// Device helpers both window-attention kernels use: the bf16 tensor-core k-step, asynchronous copies and ldmatrix.
#pragma once

namespace tc {

// One m16n8k16 bf16 mma, fp32 accumulate in place: c += A (16x16, row) * B (16x8, col).
__device__ __forceinline__ void mma_bf16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Asynchronous 16-byte copy global -> shared; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, unsigned src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" : : "r"(dst), "l"(gmem), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" : : : "memory"); }

// Wait until at most N of this thread's copy groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" : : "n"(N) : "memory"); }

// Four 8x8 bf16 matrices from shared memory, one row address per lane (lanes 8 i .. 8 i + 7: matrix i);
// trans hands lane t the elements at rows 2 (t % 4), 2 (t % 4) + 1 of column t / 4.
template <bool Trans>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
  }
}

// The rows a block takes (ROWS per block, sequence by sequence): its sequence, first row and row count.
struct RowBlock {
  int seq;
  int row0;  // first row of the block (an index into the call's rows)
  int rows;  // 1..ROWS; 0 for a block past the call's rows
  int pos0;  // absolute position of the sequence's first row in this call
  int seq_row0;
};

template <int ROWS>
__device__ __forceinline__ RowBlock find_rows(const int* seq_row0, const int* seq_pos0, int n_seq, int block) {
  RowBlock b{0, 0, 0, 0, 0};
  for (int s = 0; s < n_seq; ++s) {
    const int rows = seq_row0[s + 1] - seq_row0[s];
    const int blocks = (rows + ROWS - 1) / ROWS;
    if (block < blocks) {
      b.seq = s;
      b.seq_row0 = seq_row0[s];
      b.row0 = seq_row0[s] + block * ROWS;
      b.rows = min(ROWS, seq_row0[s + 1] - b.row0);
      b.pos0 = seq_pos0[s];
      return b;
    }
    block -= blocks;
  }
  return b;
}

// A row's first visible key: the window's start, or key 0 without a window.
__device__ __forceinline__ int first_key(int pos, int win) { return win > 0 ? max(0, pos - win + 1) : 0; }

// -inf as an fp32 bit pattern.
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

}  // namespace tc
