// Fault: the fused kernel's online merge never rescales earlier chunks when a later one raises the maximum.
#define WF_RESCALE(x, a) (x)
#include "../kernels/window_prompt_fused.cu"
