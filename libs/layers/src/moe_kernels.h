// The mixture-of-experts head's element-wise work (see reel/layers/heads.h for the formulas):
// from the gate and expert pre-activations of n (example, class) items to their logits and, for
// training, the logits' derivatives with respect to the pre-activations, so that the backward
// pass is a product by dlogits instead of a second pass through the exponentials and logarithms.
// Items are processed in blocks turned into one row per expert of kBlock items, so every loop runs
// across items at the full vector width whatever the number of experts.
//
// moe_kernels.inc is compiled once per instruction set (moe_kernels_{avx512,avx2,base}.cc); the
// unqualified functions pick the CPU's best (vector_isa.h) and split the items over the OpenMP
// threads. The per-set ones are declared for tests that compare every set the CPU runs.
//
// Thread-safety: pure functions on caller-owned buffers.
#ifndef REEL_LIBS_LAYERS_SRC_MOE_KERNELS_H_
#define REEL_LIBS_LAYERS_SRC_MOE_KERNELS_H_

#include <cstdint>

namespace reel::layers {

// z: [n, E + 1] gate pre-activations (z[0] the dummy expert's); a: [n, E] expert pre-activations.
struct MoeItems {
  const float* z = nullptr;
  const float* a = nullptr;
  int64_t n = 0;
  int64_t experts = 0;  // E >= 1
};

// logits[i] = log p_i - log(1 - p_i). With unit_dz and unit_da (both or neither), also
// d logit_i / d z [n, E + 1] and d logit_i / d a [n, E].
void MoeLogits(const MoeItems& items, float* logits, float* unit_dz = nullptr,
               float* unit_da = nullptr);
// dz [n, E + 1] and da [n, E] from dlogits [n] and MoeLogits' unit_dz and unit_da.
void MoeLogitGrads(int64_t n, int64_t experts, const float* unit_dz, const float* unit_da,
                   const float* dlogits, float* dz, float* da);

#define REEL_MOE_KERNELS_DECLARE(ns)                                                 \
  namespace ns {                                                                     \
  void Logits(const MoeItems& items, float* logits, float* unit_dz, float* unit_da); \
  }
REEL_MOE_KERNELS_DECLARE(moe_avx512)
REEL_MOE_KERNELS_DECLARE(moe_avx2)
REEL_MOE_KERNELS_DECLARE(moe_base)
#undef REEL_MOE_KERNELS_DECLARE

}  // namespace reel::layers

#endif  // REEL_LIBS_LAYERS_SRC_MOE_KERNELS_H_
