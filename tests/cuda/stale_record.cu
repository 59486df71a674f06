// Gate-5 control: tiny_scale changed (a second shared tile) while its committed launch record did not.
#include <cuda_bf16.h>

template <int N>
__global__ void tiny_scale(float* x, float a, int n) {
  extern __shared__ float dyn[];
  __shared__ float tile[N];
  __shared__ float shadow[N];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  tile[threadIdx.x % N] = v * a;
  shadow[(threadIdx.x + 5) % N] = v;
  dyn[threadIdx.x] = v;
  __syncthreads();
  if (i < n) x[i] = tile[(threadIdx.x + 1) % N] + shadow[threadIdx.x % N] + dyn[(threadIdx.x + 3) % blockDim.x];
}

extern "C" __global__ void tiny_round(__nv_bfloat16* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}

template __global__ void tiny_scale<32>(float*, float, int);
