// Gate-5 control: the V prefetch distance was retuned and the launch records were not rewritten.
#define WD_PV_UNROLL(DT) ((DT) == 2 ? 8 : 4)
#include "../kernels/window_decode.cu"
