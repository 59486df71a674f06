// Fault: the window opens one key early (win + 1 keys visible).
#define WD_FIRST(pos, win) ((win) > 0 ? max(0, (pos) - (win)) : 0)
#include "../kernels/window_decode.cu"
