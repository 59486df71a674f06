// Fault: the row's own position (its last key) is left out of the window.
#define WD_LAST_KEY(pos) ((pos) - 1)
#include "../kernels/window_decode.cu"
