// Fault: the merge adds chunks without exp(m_c - M).
#define WP_MERGE_FACTOR(m_c, M) 1.0f
#include "../kernels/window_prompt.cu"
