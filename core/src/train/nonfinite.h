// The trainer's check for non-finite losses, gradients and parameters (trainer.stop_on_nonfinite,
// docs/training.md): one vectorisable pass over the floats, and on a finding, which parameter
// block holds the first non-finite one.
#ifndef REEL_CORE_SRC_TRAIN_NONFINITE_H_
#define REEL_CORE_SRC_TRAIN_NONFINITE_H_

#include <span>
#include <string>

#include "reel/param_arena.h"

namespace reel::core {

// True iff no element is NaN or +-inf. Tests the exponent bits of every element and ORs the
// results, so the compiler vectorises it and no sum can overflow.
bool AllFinite(std::span<const float> values);

// Where the first non-finite element of `buffer` (the arena's values() or grads()) is: its block's
// name and its index in the block ("w[17]"); empty when every element is finite.
std::string FirstNonFinite(const ParamArena& arena, std::span<const float> buffer);
// The same within one block of the arena only ("w[17]", or empty).
std::string FirstNonFiniteIn(const ParamArena::Block& block, std::span<const float> buffer);

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_NONFINITE_H_
