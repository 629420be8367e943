// A bf16 "device" on the host, for testing the mixed-precision engine (fp32
// master weights, bf16 compute copies and gradients, widened reductions,
// checkpoint round trips) without a GPU. Memory is host memory, bf16 is
// stored as its 16-bit pattern (core/bf16.hpp), and the model is the CPU
// GPT<float> run on fp32 copies of the bf16 parameters, with gradients
// rounded back to bf16 after every accumulation, as a bf16 GPU stores them.
#pragma once

#include <memory>

#include "strategies/unit_model.hpp"

namespace gpt::test {

std::unique_ptr<DeviceBackend> make_emulated_bf16_backend(MemoryTracker* tracker);

}  // namespace gpt::test
