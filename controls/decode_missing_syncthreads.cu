// Fault: no barrier between writing P and reading it in the PV phase (a shared-memory race).
#define WD_SYNC_AFTER_P()
#include "../kernels/window_decode.cu"
