#include "reel/layers/vector_isa.h"

namespace reel::layers {
namespace {

VectorIsa Detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // The set the AVX-512 kernels are compiled for (cmake/ReelVectorIsa.cmake).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return VectorIsa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorIsa::kAvx2;
#endif
  return VectorIsa::kBaseline;
}

}  // namespace

VectorIsa DetectVectorIsa() {
  static const VectorIsa isa = Detect();
  return isa;
}

const char* VectorIsaName(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kAvx512:
      return "avx512";
    case VectorIsa::kAvx2:
      return "avx2";
    case VectorIsa::kBaseline:
      break;
  }
  return "baseline";
}

}  // namespace reel::layers
