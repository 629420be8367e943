// Deterministic, slice-addressable parameter initialisation (GPT-2 scheme:
// normal(0, 0.02), residual projections normal(0, 0.02/sqrt(2 n_layer)),
// LayerNorm weight 1 and bias 0, biases 0).
//
// Each element's value is a pure function of (seed, tensor name, element
// index): a counter-based generator, not a stream. So any range of any unit
// can be produced on its own, and a rank that materialises only its shard
// gets exactly the values the single-rank model has there.
#pragma once

#include <cstdint>

#include "model/layout.hpp"

namespace gpt {

// Writes elements [begin, end) of unit `unit`'s flat buffer into out[0 .. end-begin).
template <typename T>
void init_unit_range(const UnitSpec& unit, uint64_t seed, int64_t begin, int64_t end, T* out);

// Writes the whole unit.
template <typename T>
void init_unit(const UnitSpec& unit, uint64_t seed, T* out) {
  init_unit_range(unit, seed, 0, unit.numel, out);
}

// Standard normal sample number `index` of stream `key` (exposed for tests).
double counter_normal(uint64_t key, uint64_t index);
uint64_t tensor_key(uint64_t seed, const std::string& name);

}  // namespace gpt
