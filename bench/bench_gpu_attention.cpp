// The fused causal attention kernels side by side on one GPU: tensor cores
// (bf16) and CUDA cores (bf16 and fp32), forward and backward timed with
// CUDA events after warm-up on the same random inputs. Prints a table and
// one JSON line.
//
// FLOPs follow the FlashAttention convention: forward = the two causal
// products (QK^T, PV) = 2*B*T^2*C, backward = 2.5 x forward (five products;
// the recomputation inside the backward kernels is not counted as useful).
//
// Tensor cores four times: dQ from the score gradients the dK/dV kernel
// stored (the trainer's default budget, model/attention_ds.hpp; the row's
// ds_mib says how much it took), the same in chunks of (b, h) pairs whose
// dS fits in three quarters of the GPU's L2 cache (so that each chunk's dQ
// launch reads dS from L2, not DRAM, at the price of more, smaller
// launches; --attention-ds-mib sets such a budget in the trainer), dQ
// recomputed (no room for them), and the first again with the forward on
// 128-query tiles (forward_wide_kernel); and cuDNN's fused attention
// (model/cuda/attention_cudnn.hpp, gpt_train --attention cudnn) where
// cuDNN opens, else a line and "cudnn_unavailable" in the JSON saying why.
// At head size 128 also the backward single-buffered (dQ recomputed), as
// GPUs of 99 KiB a block run it (A10, L4, L40S, RTX 30/40/50): what giving
// up the overlap of tile loads and products costs, beside the recompute row.
// --head-size N splits the model's width into heads of N instead of its
// own (128: gpt2-124m's width in 6 heads; the wide forward's row is left
// out there, it takes 32 and 64).
//
//   bench_gpu_attention [--model gpt2-124m] [--head-size N] [--batch 16] [--seq 1024] [--iters 20]
#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_bench.hpp"
#include "core/cuda/device_memory.hpp"
#include "core/cuda/device_query.hpp"
#include "core/cuda/stream.hpp"
#include "model/cuda/attention.hpp"
#include "model/cuda/attention_cudnn.hpp"
#include "model/cuda/attention_tc.hpp"
#include "model/cuda/check.hpp"
#include "model/config.hpp"
#include "model/cuda/elementwise.hpp"

namespace {

using namespace gpt;

struct Args : bench::Shape {
  int iters = 20, embd = 0, heads = 0, head_size = 0;  // embd, heads: from the model and --head-size
};

struct Timing {
  double fwd_ms, bwd_ms;
};

template <typename T>
Timing time_kernel(const Args& a, cuda::AttentionKernel kernel, int64_t ds_budget, bool cudnn, const float* host_qkv,
                   const float* host_dy, cuda::DeviceAllocator* alloc, cudaStream_t stream) {
  const cuda::AttentionShape s{a.batch, a.seq, a.embd, a.heads};
  const int64_t n_qkv = s.B * s.T * 3 * s.C, n_out = s.B * s.T * s.C;
  cuda::DeviceBuffer<float> staging(n_qkv, MemCategory::kActivations, alloc);
  cuda::DeviceBuffer<T> qkv(n_qkv, MemCategory::kActivations, alloc), dqkv(n_qkv, MemCategory::kActivations, alloc);
  cuda::DeviceBuffer<T> out(n_out, MemCategory::kActivations, alloc), dy(n_out, MemCategory::kActivations, alloc);
  cuda::DeviceBuffer<float> lse(s.B * s.NH * s.T, MemCategory::kActivations, alloc);
  cuda::DeviceBuffer<float> scratch(cuda::attention_backward_scratch(s, ds_budget), MemCategory::kActivations, alloc);
  const int64_t cudnn_ws =
      cudnn ? std::max(cuda::cudnn_attention_forward_workspace(s), cuda::cudnn_attention_backward_workspace(s)) : 0;
  cuda::DeviceBuffer<float> ws(size_t(cudnn_ws / 4), MemCategory::kScratch, alloc);
  GPT_CUDA_OK(cudaMemcpy(staging.data(), host_qkv, n_qkv * sizeof(float), cudaMemcpyHostToDevice));
  cuda::convert(qkv.data(), staging.data(), n_qkv, stream);
  GPT_CUDA_OK(cudaMemcpy(staging.data(), host_dy, n_out * sizeof(float), cudaMemcpyHostToDevice));
  cuda::convert(dy.data(), staging.data(), n_out, stream);

  cudaEvent_t e0, e1, e2;
  GPT_CUDA_OK(cudaEventCreate(&e0));
  GPT_CUDA_OK(cudaEventCreate(&e1));
  GPT_CUDA_OK(cudaEventCreate(&e2));
  float fwd = 0, bwd = 0;
  for (int it = 0; it < a.iters + 3; ++it) {  // 3 untimed warm-up iterations
    GPT_CUDA_OK(cudaEventRecord(e0, stream));
    if constexpr (std::is_same_v<T, cuda::bf16>)
      if (cudnn) cuda::cudnn_attention_forward(out.data(), lse.data(), qkv.data(), s, ws.data(), cudnn_ws, stream);
    if (!cudnn) cuda::attention_forward(out.data(), lse.data(), qkv.data(), s, stream, kernel);
    GPT_CUDA_OK(cudaEventRecord(e1, stream));
    if constexpr (std::is_same_v<T, cuda::bf16>)
      if (cudnn)
        cuda::cudnn_attention_backward(dqkv.data(), dy.data(), qkv.data(), out.data(), lse.data(), s, ws.data(),
                                       cudnn_ws, stream);
    if (!cudnn)
      cuda::attention_backward(dqkv.data(), scratch.data(), int64_t(scratch.size()), dy.data(), qkv.data(),
                               out.data(), lse.data(), s, stream, kernel);
    GPT_CUDA_OK(cudaEventRecord(e2, stream));
    GPT_CUDA_OK(cudaEventSynchronize(e2));
    if (it < 3) continue;
    float f = 0, b = 0;
    GPT_CUDA_OK(cudaEventElapsedTime(&f, e0, e1));
    GPT_CUDA_OK(cudaEventElapsedTime(&b, e1, e2));
    fwd += f;
    bwd += b;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
  return {fwd / a.iters, bwd / a.iters};
}

nlohmann::json run(Args& a) {
  const GPTConfig cfg = preset(a.model);
  a.embd = int(cfg.n_embd);
  if (a.head_size > 0 && a.embd % a.head_size != 0)
    throw std::runtime_error("--head-size " + std::to_string(a.head_size) + " does not divide --model " + a.model +
                             "'s width " + std::to_string(a.embd));
  a.heads = a.head_size > 0 ? a.embd / a.head_size : int(cfg.n_head);
  if (a.embd % a.heads != 0 || !cuda::attention_supported(a.embd / a.heads))
    throw std::runtime_error("--model " + a.model + ": head size " + std::to_string(a.embd) + " / " +
                             std::to_string(a.heads) + " is not supported on cuda (" + cuda::attention_head_sizes() +
                             ")");
  const int64_t n_qkv = int64_t(a.batch) * a.seq * 3 * a.embd, n_out = int64_t(a.batch) * a.seq * a.embd;
  std::vector<float> qkv(static_cast<size_t>(n_qkv)), dy(static_cast<size_t>(n_out));
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : qkv) x = nd(rng);
  for (auto& x : dy) x = nd(rng);
  const cuda::Stream owner;  // first: destroyed after everything that uses it
  const cudaStream_t stream = owner.get();
  MemoryTracker tracker;
  cuda::DeviceAllocator alloc(&tracker);
  const double fwd_flops = 2.0 * a.batch * double(a.seq) * a.seq * a.embd;
  const std::string dev = cuda::device_name(0);
  nlohmann::json rows = nlohmann::json::array();
  struct Case {
    const char* name;
    bool bf16;
    cuda::AttentionKernel kernel;
    int64_t ds_budget;
    bool cudnn = false;
    bool single = false;  // the backward single-buffered (attention_force_single_buffers)
  };
  const int64_t stored = kAttentionDsStoredBytes;
  const int64_t in_l2 = bench::attention_ds_in_l2_budget();
  const Case cases[] = {{"tensor_core_bf16", true, cuda::AttentionKernel::kTensorCore, stored},
                        {"tensor_core_bf16_ds_in_l2", true, cuda::AttentionKernel::kTensorCore, in_l2},
                        {"tensor_core_bf16_recompute", true, cuda::AttentionKernel::kTensorCore, 0},
                        {"tensor_core_bf16_single", true, cuda::AttentionKernel::kTensorCore, 0, false, true},
                        {"tensor_core_bf16_wide_fwd", true, cuda::AttentionKernel::kTensorCoreWide, stored},
                        {"cudnn_bf16", true, cuda::AttentionKernel::kAuto, 0, true},
                        {"simt_bf16", true, cuda::AttentionKernel::kSimt, 0},
                        {"simt_fp32", false, cuda::AttentionKernel::kSimt, 0}};
  std::printf("# attention of %s: B=%d T=%d C=%d NH=%d on %s\n", a.model.c_str(), a.batch, a.seq, a.embd, a.heads,
              dev.c_str());
  std::printf("# %-26s %10s %10s %10s %10s %8s\n", "kernel", "fwd ms", "bwd ms", "fwd TF/s", "bwd TF/s", "dS MiB");
  nlohmann::json cudnn_note;  // why cuDNN's row is missing, if it is
  for (const Case& c : cases) {
    const int64_t b = c.ds_budget;
    if (c.kernel == cuda::AttentionKernel::kTensorCoreWide && a.embd / a.heads > 64) {
      std::printf("  %-26s n/a: the wide forward takes head sizes 32 and 64\n", c.name);
      continue;
    }
    if (c.single && !cuda::detail::attention_has_single_buffers(a.embd / a.heads)) {
      std::printf("  %-26s n/a: the backward is single-buffered at head size 128 only\n", c.name);
      continue;
    }
    if (c.cudnn) {  // optional: cuDNN may be absent, or offer no engine for the shape
      const std::string why = cuda::cudnn_attention_unavailable(cuda::AttentionShape{a.batch, a.seq, a.embd, a.heads});
      if (!why.empty()) {
        std::printf("  %-26s unavailable: %s\n", c.name, why.c_str());
        cudnn_note = why;
        continue;
      }
    }
    cuda::detail::attention_force_single_buffers(c.single);
    const Timing t = c.bf16 ? time_kernel<cuda::bf16>(a, c.kernel, b, c.cudnn, qkv.data(), dy.data(), &alloc, stream)
                            : time_kernel<float>(a, c.kernel, b, c.cudnn, qkv.data(), dy.data(), &alloc, stream);
    cuda::detail::attention_force_single_buffers(false);
    const double ftf = fwd_flops / (t.fwd_ms * 1e-3) / 1e12, btf = 2.5 * fwd_flops / (t.bwd_ms * 1e-3) / 1e12;
    const double ds_mib =
        c.bf16 && !c.cudnn ? double(attention_ds_bytes(a.batch, a.seq, a.heads, b)) / (1 << 20) : 0.0;
    std::printf("  %-26s %10.3f %10.3f %10.1f %10.1f %8.1f\n", c.name, t.fwd_ms, t.bwd_ms, ftf, btf, ds_mib);
    rows.push_back({{"kernel", c.name}, {"fwd_ms", t.fwd_ms}, {"bwd_ms", t.bwd_ms}, {"fwd_tflops", ftf},
                    {"bwd_tflops", btf}, {"ds_mib", ds_mib}});
  }
  nlohmann::json out = {{"bench", "attention"}, {"device", dev},    {"model", a.model},
                        {"batch", a.batch},    {"seq", a.seq},    {"embd", a.embd},
                        {"heads", a.heads},    {"head_size", a.embd / a.heads}, {"iters", a.iters},
                        {"results", rows}};
  if (!cudnn_note.is_null()) out["cudnn_unavailable"] = cudnn_note;
  else out["cudnn"] = cuda::cudnn_attention_library();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Causal attention kernels of the CUDA backend, side by side"};
  bench::add_shape_options(app, a, false);
  app.add_option("--iters", a.iters, "timed iterations")->check(gpt::kPositiveInt);
  app.add_option("--head-size", a.head_size, "split the model's width into heads of this size (default: the model's)")
      ->check(gpt::kPositiveInt);
  CLI11_PARSE(app, argc, argv);
  return bench::run_on_gpu([&] { return run(a); });
}
