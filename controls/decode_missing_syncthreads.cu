// Fault: no barrier between the score tiles written to shared memory and their use (a shared-memory race).
#define WD_SYNC_AFTER_SCORES()
#include "../kernels/window_decode.cu"
