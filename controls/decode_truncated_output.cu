// Fault: the output is rounded to bf16 toward zero instead of to nearest even.
#define WD_OUT_ROUND(x) __float2bfloat16_rz(x)
#include "../kernels/window_decode.cu"
