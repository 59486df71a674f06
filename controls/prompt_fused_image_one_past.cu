// Fault: in the fused kernel, image rows see one key past the end of their span.
#define WF_LAST_KEY(pos, given) ((given) > (pos) ? (given) + 1 : (given))
#include "../kernels/window_prompt_fused.cu"
