// Fault: the merge adds chunks with shared-memory atomics, in an order set by scheduling and the batch index.
#define WD_ATOMIC_MERGE
#include "../kernels/window_decode.cu"
