// Fault-isolation kernels: an illegal address and a kernel that never returns, with the partials' argument list;
// the decode merge comes from the kernel under test so each fault stands in for a whole decode call.
#include "../../kernels/window_decode.cu"

// Writes through a wild pointer: the launch ends with an illegal-address error.
extern "C" __global__ void illegal_address(const unsigned short* q, const unsigned short* k_cache,
                                           const unsigned short* v_cache, const int* row_pos, const int* row_slot,
                                           float* part_m, float* part_l, float* part_o, int win, int ring, int n_part,
                                           float scale, int kv_heads) {
  constexpr unsigned long long kWild = 0x100ull;  // first page of the global address space: never mapped
  float* wild = reinterpret_cast<float*>(kWild) + threadIdx.x;
  // A global-space store in PTX: the compiler can neither drop it nor route it to a shared or local window.
  asm volatile("st.global.f32 [%0], %1;" : : "l"(wild), "f"(scale) : "memory");
}

// Spins forever on a flag nothing ever clears: the launch never completes.
extern "C" __global__ void never_returns(const unsigned short* q, const unsigned short* k_cache,
                                         const unsigned short* v_cache, const int* row_pos, const int* row_slot,
                                         float* part_m, float* part_l, float* part_o, int win, int ring, int n_part,
                                         float scale, int kv_heads) {
  __shared__ volatile int spin;  // volatile: every test is a fresh shared-memory read the compiler must keep
  if (threadIdx.x == 0) spin = 1;
  __syncthreads();
  while (spin != 0) {
  }
  if (threadIdx.x == 0) part_m[blockIdx.x] = scale;  // unreachable
}
