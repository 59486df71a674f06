// Fault: key chunks start at the call's first row, not at absolute positions.
#define WP_CHUNK_ORIGIN(pos0) (pos0)
#include "../kernels/window_prompt.cu"
