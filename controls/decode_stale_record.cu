// Gate-5 control: the V pipeline was retuned (three stages) and the launch records were not rewritten.
#define WD_V_STAGES 3
#include "../kernels/window_decode.cu"
