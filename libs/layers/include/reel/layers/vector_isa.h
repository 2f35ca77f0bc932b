// The widest vector instruction set this CPU runs, for element-wise kernels that are compiled once
// per set (see vector_math.inc and cmake/ReelVectorIsa.cmake) and picked at run time, so that one
// binary serves every x86-64 machine at its own vector width.
//
// Thread-safety: DetectVectorIsa() is safe from any thread (detected once).
#ifndef REEL_LAYERS_VECTOR_ISA_H_
#define REEL_LAYERS_VECTOR_ISA_H_

namespace reel::layers {

enum class VectorIsa { kBaseline, kAvx2, kAvx512 };

VectorIsa DetectVectorIsa();
// "avx512", "avx2" or "baseline".
const char* VectorIsaName(VectorIsa isa);

}  // namespace reel::layers

#endif  // REEL_LAYERS_VECTOR_ISA_H_
