// Fault: group slot g of key head kh computes query head g * Hk + kh instead of kh * G + g.
#define WD_Q_HEAD(kh, g, G, Hk) ((g) * (Hk) + (kh))
#include "../kernels/window_decode.cu"
