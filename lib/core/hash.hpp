// The splitmix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mix
// with full avalanche. One definition for every counter-based random value
// and hash in the project (initialisation, data order, checksums), so their
// results never drift apart.
#pragma once

#include <cstdint>

namespace gpt {

// splitmix64 of x: the finaliser applied to x + the golden-ratio increment.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace gpt
