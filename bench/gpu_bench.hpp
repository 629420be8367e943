// What the single-GPU benchmarks (bench_gpu_*) share: the shape options
// each takes, and main's frame: without a GPU one line and exit 2, a failure
// "error: ..." and exit 1, else the benchmark's JSON line on stdout after
// its table (bench/gpu_vs_torch.sh takes the line starting with '{').
#pragma once

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "../apps/command_line.hpp"  // kPositiveInt: the ranges named as integers
#include "core/cuda/device_query.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/device_state.hpp"
#include "model/init.hpp"
#include "model/layout.hpp"

namespace gpt::bench {

struct Shape {
  std::string model = "gpt2-124m", precision = "bf16";
  int batch = 16, seq = 1024;
};

// --model, --batch, --seq; and --precision where the benchmark has a choice.
inline void add_shape_options(CLI::App& app, Shape& s, bool with_precision) {
  app.add_option("--model", s.model, "model preset");
  app.add_option("--batch", s.batch, "micro-batch sequences")->check(gpt::kPositiveInt);
  app.add_option("--seq", s.seq, "sequence length")->check(gpt::kPositiveInt);
  if (with_precision) app.add_option("--precision", s.precision, "bf16 or fp32")->check(CLI::IsMember({"bf16", "fp32"}));
}

// A model's parameters on the device, initialised as a run with seed 1234
// starts (fp32 host values, uploaded once and then freed).
template <typename T>
cuda::DeviceReplicatedState<T> initial_state(const ParamLayout& layout, cuda::DeviceAllocator* alloc,
                                             cudaStream_t stream) {
  std::vector<std::vector<float>> host(layout.num_units());
  std::vector<const float*> ptrs;
  for (size_t u = 0; u < layout.num_units(); ++u) {
    host[u].resize(size_t(layout.unit(u).numel));
    init_unit(layout.unit(u), 1234, host[u].data());
    ptrs.push_back(host[u].data());
  }
  return cuda::DeviceReplicatedState<T>(layout, ptrs, alloc, stream);
}

// A budget for the attention backward's stored score gradients that keeps
// each chunk's dS in the first GPU's L2 between the dK/dV launch that writes
// it and the dQ launch that reads it: three quarters of the L2 (the rest
// holds the tiles of q, k and v those launches stream). The stored-dS rows'
// budget (kAttentionDsStoredBytes) holds all pairs at once instead (gpt_train
// stores none by default); the benchmark rows *_ds_in_l2 measure the difference.
inline int64_t attention_ds_in_l2_budget() {
  int l2_bytes = 0;
  GPT_CUDA_OK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
  return int64_t(l2_bytes) / 4 * 3;
}

// Milliseconds per call of `run` (which queues work on s), over `iters`
// calls between two events, after 3 warm-up calls.
inline double time_ms(const std::function<void()>& run, int iters, cudaStream_t s) {
  for (int i = 0; i < 3; ++i) run();
  cudaEvent_t e0, e1;
  GPT_CUDA_OK(cudaEventCreate(&e0));
  GPT_CUDA_OK(cudaEventCreate(&e1));
  GPT_CUDA_OK(cudaEventRecord(e0, s));
  for (int i = 0; i < iters; ++i) run();
  GPT_CUDA_OK(cudaEventRecord(e1, s));
  GPT_CUDA_OK(cudaEventSynchronize(e1));
  float total = 0;
  GPT_CUDA_OK(cudaEventElapsedTime(&total, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return total / iters;
}

// Runs `bench` on the first GPU and prints the JSON it returns.
inline int run_on_gpu(const std::function<nlohmann::json()>& bench) {
  try {
    if (cuda::device_count() == 0) {
      std::fprintf(stderr, "error: %s\n", cuda::no_device_reason().c_str());
      return 2;
    }
    std::printf("%s\n", bench().dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace gpt::bench
