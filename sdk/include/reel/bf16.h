// bfloat16 values and their scalar conversions, shared by the layers' bf16 kernels
// (reel/layers/bf16.h) and the core's 16-bit gradient wire (docs/distributed.md, "Compression on
// the wire").
//
// A bf16 value is the upper half of a float (8 exponent bits, 7 stored mantissa bits), held as
// uint16_t. ToBf16 rounds to nearest even; NaN stays NaN; as the hardware instruction
// (vcvtneps2bf16) does, denormal floats become zero of the same sign.
//
// Thread-safety: reentrant.
#ifndef REEL_BF16_H_
#define REEL_BF16_H_

#include <cstdint>
#include <cstring>

namespace reel {

using bf16_t = uint16_t;  // a bfloat16's bits

// One value, rounded to nearest even (the reference for every vector path).
inline bf16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((u >> 16) | 0x40u);  // NaN
  if ((u & 0x7f800000u) == 0) return static_cast<bf16_t>((u >> 16) & 0x8000u);  // zero, denormal
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_t>(u >> 16);
}
// The float a bf16 value stands for (exact).
inline float FromBf16(bf16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace reel

#endif  // REEL_BF16_H_
