// lstm_gates_kernels.inc compiled for one instruction set (flags in ../CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "lstm_gates.h"

namespace reel::bilstm::gates_base {
#include "lstm_gates_kernels.inc"
}  // namespace reel::bilstm::gates_base
