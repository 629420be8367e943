// 16-bit float formats on the host, carried as their bit patterns:
// bfloat16 <-> float (round to nearest even; NaN stays NaN), and IEEE
// binary16 -> float (exact: every half is a float; Hugging Face files in F16).
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

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Subnormals
// (exponent 0) are mantissa * 2^-24; exponent 31 is Inf or NaN.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);  // rebias: 127 - 15 = 112
  } else {
    const float m = static_cast<float>(man) * 0x1p-24f;  // exact: man < 2^10
    std::memcpy(&u, &m, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace gpt
