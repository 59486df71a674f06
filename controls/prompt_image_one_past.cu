// Fault: image rows see one key past the end of their span.
#define WP_LAST_KEY(pos, given) ((given) > (pos) ? (given) + 1 : (given))
#include "../kernels/window_prompt.cu"
