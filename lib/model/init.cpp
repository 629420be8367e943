#include "model/init.hpp"

#include "core/hash.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gpt {
namespace {

}  // namespace

uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name: stable across layouts
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return mix64(seed ^ mix64(h));
}

double counter_normal(uint64_t key, uint64_t index) {
  uint64_t r = mix64(key ^ mix64(index));
  // Box-Muller on two 32-bit uniforms; u1 in (0, 1] so log is finite.
  double u1 = (static_cast<double>(r >> 32) + 1.0) * 0x1p-32;
  double u2 = static_cast<double>(r & 0xffffffffull) * 0x1p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

template <typename T>
void init_unit_range(const UnitSpec& unit, uint64_t seed, int64_t begin, int64_t end, T* out) {
  for (const TensorSpec& t : unit.tensors) {
    int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    T* dst = out + (lo - begin);
    const int64_t n = hi - lo, first = lo - t.offset;
    switch (t.init) {
      case InitKind::kZeros: std::fill(dst, dst + n, T(0)); break;
      case InitKind::kOnes: std::fill(dst, dst + n, T(1)); break;
      case InitKind::kNormal: {
        const uint64_t key = tensor_key(seed, t.name);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) {
          int64_t e = first + i;
          dst[i] = e < t.init_numel ? static_cast<T>(t.init_std * counter_normal(key, e)) : T(0);
        }
        break;
      }
    }
  }
}

template void init_unit_range<float>(const UnitSpec&, uint64_t, int64_t, int64_t, float*);
template void init_unit_range<double>(const UnitSpec&, uint64_t, int64_t, int64_t, double*);

}  // namespace gpt
