// CRC32C (Castagnoli), for checkpoint checksums and TFRecord framing of TensorBoard event files.
// Uses the SSE4.2 instruction when the CPU has it, a table otherwise. Thread-safe.
#ifndef REEL_CORE_SRC_CHECKPOINT_CRC32C_H_
#define REEL_CORE_SRC_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace reel::core {

// CRC32C of `data`, continuing from `crc` (the CRC of the bytes before; 0 to start).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// TFRecord's masked CRC: ((c >> 15) | (c << 17)) + 0xa282ead8.
inline uint32_t MaskCrc32c(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

}  // namespace reel::core

#endif  // REEL_CORE_SRC_CHECKPOINT_CRC32C_H_
