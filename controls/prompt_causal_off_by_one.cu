// Fault: the causal mask off by one: a row outside an image span also sees the next row's key.
#define WP_LAST_KEY(pos, given) ((given) == (pos) ? (pos) + 1 : (given))
#include "../kernels/window_prompt.cu"
