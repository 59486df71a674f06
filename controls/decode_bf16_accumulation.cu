// Fault: the partials' l and o running sums are rounded to bf16 after every add.
#define WD_ACC_ROUND(x) __bfloat162float(__float2bfloat16_rn(x))
#include "../kernels/window_decode.cu"
