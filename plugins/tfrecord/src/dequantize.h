// YouTube-8M (de)quantization, and the stores that write decoded batches.
//
// Frame-level batches are about four bytes of float per input byte, and a batch of 32 videos is
// tens of megabytes: larger than the caches, so writing it with ordinary stores first reads every
// destination line from memory. StoreMode::kStreaming writes such outputs with non-temporal
// stores instead (no read, half the memory traffic); call StoreFence() after them, before the
// output is handed to another thread.
//
// Thread-safety: all functions are pure (they touch only their arguments).
#ifndef REEL_PLUGINS_TFRECORD_SRC_DEQUANTIZE_H_
#define REEL_PLUGINS_TFRECORD_SRC_DEQUANTIZE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace reel::tfrecord {

// YouTube-8M quantization (docs/formats.md): x = q * 4/255 + 4/512 - 2, computed in float.
float Dequantize(uint8_t q);
// Clips x to [-2, 2] (NaN to -2), then round((x + 2) * 255/4), halves rounded up.
uint8_t Quantize(float x);

enum class StoreMode {
  kCached,     // ordinary stores: the output stays in cache for a reader that comes right away
  kStreaming,  // non-temporal stores where the destination allows (any alignment works)
};

// Dequantizes n bytes into out[0, n); uses AVX2 when the CPU has it. Every mode gives the same
// values, bit for bit.
void DequantizeBytes(const uint8_t* q, size_t n, float* out, StoreMode mode = StoreMode::kCached);
// Sets out[0, n) to 0.0f.
void FillZero(float* out, size_t n, StoreMode mode);
// One frame of a payload: n quantized bytes at src, to be written as n floats at dst.
struct FrameSpan {
  const uint8_t* src;
  size_t n;
  float* dst;
};

// Dequantizes every span of `payload` and returns Crc32c(payload), reading each byte once: the
// CRC instruction runs in the same loop as the conversion, where it costs little beside the
// stores, instead of in a pass of its own. REQUIRES: the spans lie inside `payload`, in
// ascending order, without overlapping.
uint32_t DequantizeWithCrc(std::string_view payload, std::span<const FrameSpan> spans,
                           StoreMode mode);

// Orders earlier streaming stores before later stores (an sfence); a no-op without them.
void StoreFence();

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_DEQUANTIZE_H_
