// moe_kernels.inc compiled for one instruction set (flags: cmake/ReelVectorIsa.cmake).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "moe_kernels.h"

namespace reel::layers::moe_base {
#include "moe_kernels.inc"
}  // namespace reel::layers::moe_base
