// Fault: the in-chunk PV order depends on the batch size (half the key groups when B > 8).
#define WD_KEY_GROUPS(kg_default, B) ((B) > 8 && (kg_default) > 1 ? (kg_default) / 2 : (kg_default))
#include "../kernels/window_decode.cu"
