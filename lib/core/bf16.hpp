// bfloat16 <-> float conversions on the host (round to nearest even; NaN
// stays NaN). bf16 is carried as its 16-bit pattern.
#pragma once

#include <cstdint>
#include <cstring>

namespace gpt {

inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

}  // namespace gpt
