// Gate-5 control: a 40 KiB static tile, so the entry's 64 KiB of dynamic shared memory exceeds what
// sm_86, sm_89, sm_120 and sm_121 allow one block (99 KiB with the opt-in); sm_80, sm_90 and sm_100 fit it.
#include <cuda_bf16.h>

template <int N>
__global__ void tiny_scale(float* x, float a, int n) {
  extern __shared__ float dyn[];
  __shared__ float tile[N];
  __shared__ float wide[10240];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  tile[threadIdx.x % N] = v * a;
  wide[(i * 7) % 10240] = v;
  dyn[threadIdx.x] = v;
  __syncthreads();
  if (i < n) x[i] = tile[(threadIdx.x + 1) % N] + wide[(i * 3) % 10240] + dyn[(threadIdx.x + 3) % blockDim.x];
}

extern "C" __global__ void tiny_round(__nv_bfloat16* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}

template __global__ void tiny_scale<32>(float*, float, int);
