// AdamW on the device (semantics: model/adamw.hpp) with fp32 master weights.
//
// Mixed precision: the optimizer state is master[] (fp32 parameters), m[]
// and v[] (fp32); the gradient g is in the gradient type G (bf16 or fp32);
// after the update the new master value is also written, rounded, to the
// compute copy `param` of type T (bf16) that forward and backward read. In
// fp32 mode the master is the compute copy: pass param = nullptr.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/adamw.hpp"
#include "model/cuda/types.hpp"
#include "model/layout.hpp"

namespace gpt::cuda {

// Updates elements [begin, end) of `unit`; every pointer points at element
// `begin`. One launch per tensor inside the range (decay differs per tensor).
template <typename G, typename T>
void adamw_update(const UnitSpec& unit, int64_t begin, int64_t end, float* master, T* param, const G* g, float* m,
                  float* v, const AdamWHyper& h, const AdamWStep& s, cudaStream_t stream);

}  // namespace gpt::cuda
