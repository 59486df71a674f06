// Exported constants for tests/test_exports.py: variable templates kcontract reads back from the cubin
// (kcontract/toolchain/exports.py), one that differs per SM, and the shapes it refuses.

namespace ex {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr int kOptinBytes = 227 * 1024;  // sm_90 and newer (in this test: the two SMs it compiles for)
#else
constexpr int kOptinBytes = 163 * 1024;
#endif

template <int D, int G>
constexpr int kLayoutBytes = 1024 + 32 * D * G;

template <int D>
struct Traits {
  static constexpr int kPieces = D / 8;
};

// What kcontract reads back (contract.yaml `exports`):
template <int D, int G>
__constant__ const int kExportBytes = +kLayoutBytes<D, G>;  // the same on every SM
template <int D>
__constant__ const int kExportPerSm = +kOptinBytes - D;  // differs per SM
template <int D>
__constant__ const int kExportPieces = +Traits<D>::kPieces;  // a static member, read by value
template <int D>
__constant__ const int kExportNegative = -D;  // signed
template <int D>
__constant__ const long long kExportWide = (1LL << 40) + D;  // 8 bytes

// Refused: no initial value in the cubin (NOBITS), a size no integer export has.
template <int D>
__device__ int kUninitialised;
template <int D>
__constant__ const short kExportShort = D;
__constant__ const int kTable[3] = {1, 2, 3};

}  // namespace ex

extern "C" __global__ void ex_fill(int* out) { out[threadIdx.x] = ex::kTable[threadIdx.x % 3]; }
