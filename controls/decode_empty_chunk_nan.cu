// Fault: partial slots past a row's count are computed as empty chunks (NaN) and merged.
#define WD_EMPTY_CHUNKS
#include "../kernels/window_decode.cu"
