// Fault: p rounded to bf16 in a kernel declared P32.
#define WP_P_ROUND(p, pb) __bfloat162float(__float2bfloat16_rn(p))
#include "../kernels/window_prompt.cu"
