// Picks the MoE kernels for this CPU (see moe_kernels.h).
#include "moe_kernels.h"

#include "reel/layers/vector_isa.h"

namespace reel::layers {

void MoeLogits(const MoeItems& items, float* logits) {
  switch (DetectVectorIsa()) {
    case VectorIsa::kAvx512:
      return moe_avx512::Logits(items, logits);
    case VectorIsa::kAvx2:
      return moe_avx2::Logits(items, logits);
    case VectorIsa::kBaseline:
      break;
  }
  moe_base::Logits(items, logits);
}

void MoeLogitGrads(const MoeItems& items, const float* dlogits, float* dz, float* da) {
  switch (DetectVectorIsa()) {
    case VectorIsa::kAvx512:
      return moe_avx512::LogitGrads(items, dlogits, dz, da);
    case VectorIsa::kAvx2:
      return moe_avx2::LogitGrads(items, dlogits, dz, da);
    case VectorIsa::kBaseline:
      break;
  }
  moe_base::LogitGrads(items, dlogits, dz, da);
}

}  // namespace reel::layers
