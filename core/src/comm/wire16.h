// The 16-bit gradient wire of the compressed ring allreduce (compressed_ring.h,
// docs/distributed.md "Compression on the wire"): how a chunk of floats travels as bf16 or fp16.
//
// An encoded chunk of n floats is kWireHeaderBytes (a float, the chunk's scale) and n 16-bit
// values, little-endian as the host writes them. bf16: round to nearest even (reel/bf16.h), scale
// 1. fp16: the values are divided by a power of two chosen from the chunk's largest finite
// magnitude m, so that m lands in [2^14, 2^15): nothing finite overflows fp16's 65504, and values
// down to m * 2^-29 keep fp16's 11 significant bits (below that, fp16's subnormals, then zero).
// Power-of-two scales make the scaling itself exact. NaN and infinities stay non-finite in both
// formats (the trainer's non-finite checks see them).
//
// Thread-safety: reentrant.
#ifndef REEL_CORE_SRC_COMM_WIRE16_H_
#define REEL_CORE_SRC_COMM_WIRE16_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace reel::core {

enum class WireFormat { kBf16, kFp16 };

constexpr size_t kWireHeaderBytes = sizeof(float);

// The bytes of an encoded chunk of `n` floats.
constexpr size_t EncodedBytes(size_t n) { return kWireHeaderBytes + n * sizeof(uint16_t); }

// One value to fp16 and back, rounded to nearest even (the reference for the vector paths).
uint16_t ToFp16(float f);
float FromFp16(uint16_t h);

// Encodes `in` into `out` (EncodedBytes(in.size()) bytes).
void EncodeChunk(WireFormat format, std::span<const float> in, std::span<std::byte> out);
// Decodes an encoded chunk into `out` (its size gives n): out[i] = value, or out[i] += value
// when `add`.
void DecodeChunk(WireFormat format, std::span<const std::byte> in, std::span<float> out, bool add);

// x = what a receiver of x's encoding holds, in place, in blocks of `block` floats (each block
// one chunk with its own scale).
void RoundThroughWire(WireFormat format, std::span<float> x, size_t block = size_t{1} << 16);

}  // namespace reel::core

#endif  // REEL_CORE_SRC_COMM_WIRE16_H_
