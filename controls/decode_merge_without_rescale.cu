// Fault: the merge adds chunks with weight 1 instead of exp(m_c - M) (no rescale to the row maximum).
#define WD_MERGE_FACTOR(m_c, M) 1.0f
#include "../kernels/window_decode.cu"
