// Single-GPU training throughput of the CUDA backend: the full step
// (forward, fused LM head + cross-entropy, backward, global norm, clipping,
// AdamW with fp32 master weights) of a GPT-2 shape on random tokens, timed
// with CUDA events after warm-up. Prints a table row and one JSON line:
// tokens/s, MFU (model FLOPs / the device's dense bf16 or fp32 peak, see
// model/flops.hpp), step time, device memory by category, and where the
// step's time goes: events between its phases (forward, head, backward,
// optimizer) with each phase's model FLOP/s. A step's events are read
// after the next step's own host wait (the norm), so they add none.
//
//   bench_gpu_train [--model gpt2-124m] [--batch 16] [--seq 1024]
//                   [--precision bf16|fp32] [--steps 20] [--warmup 5]
//                   [--recompute none|gelu|gelu-ln] [--gemm-autotune N]
//                   [--attention-ds-mib MIB | --attention-ds-in-l2]
//                   [--attention-wide-forward] [--attention-cudnn]
//                   [--bias-grad-epilogue]
// With --gemm-autotune N (N > 1) the first step times up to N of
// cuBLASLt's algorithms per GEMM shape and keeps the fastest (Matmul::
// set_autotune); the row is "ours-autotune" and its JSON lists, per shape,
// the heuristic's first pick's time and the fastest's (gemm_tune). With
// --attention-ds-mib N > 0 the attention backward stores the score
// gradients in up to N MiB and reads dQ from them (model/attention_ds.hpp;
// the default, as gpt_train's, recomputes); the row gets "-stored-ds". With
// --attention-ds-in-l2 the budget is three quarters of the GPU's L2
// (bench::attention_ds_in_l2_budget: chunks of (batch, head) pairs whose dS
// the dQ launch reads from L2), "-ds-in-l2"; with --attention-wide-forward
// the attention forward runs on 128-query tiles (GPTOptions::
// attention_wide_forward), "-wide-fwd". Those two rows say, at the level of
// the whole step, whether either should become the trainer's default.
// With --attention-cudnn the blocks run cuDNN's fused attention
// (gpt_train --attention cudnn), "ours-cudnn-attention". With
// --bias-grad-epilogue the bias gradients come from the dW products'
// cuBLASLt epilogue (Matmul::set_bias_grad_epilogue), "-bgradb": whether
// it should replace the bias-gradient kernel.
#include <array>
#include <cstdio>
#include <random>
#include <vector>

#include "gpu_bench.hpp"
#include "core/bytes.hpp"
#include "core/cuda/device_memory.hpp"
#include "core/cuda/device_query.hpp"
#include "core/cuda/stream.hpp"
#include "model/attention_ds.hpp"
#include "model/config.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/device_state.hpp"
#include "model/cuda/gpt_cuda.hpp"
#include "model/flops.hpp"
#include "model/init.hpp"
#include "model/layout.hpp"

namespace {

using namespace gpt;

// The step's phases, in order; their boundaries are CUDA events.
constexpr int kPhases = 4;
constexpr const char* kPhaseNames[kPhases] = {
    "forward",    // zero grads, upload the batch, embedding, every block forward
    "head",       // final LayerNorm, LM head and cross-entropy, forward and backward
    "backward",   // final LayerNorm and every block backward, embedding backward
    "optimizer",  // global norm (a host wait), clipping, AdamW
};

struct Args : bench::Shape {
  int steps = 20, warmup = 5;
  bool checkpointing = false;
  std::string recompute = "none";
  int gemm_autotune = 0;
  int attention_ds_mib = int(kAttentionDsDefaultBytes >> 20);
  bool attention_ds_in_l2 = false, attention_wide_forward = false, attention_cudnn = false;
  bool bias_grad_epilogue = false;
};

template <typename T>
nlohmann::json run(const Args& a) {
  const cuda::Stream owner;  // first: destroyed after everything that uses it
  const cudaStream_t stream = owner.get();
  GPTConfig cfg = preset(a.model);
  ParamLayout layout(cfg);
  MemoryTracker tracker;
  cuda::DeviceAllocator alloc(&tracker);
  cuda::Matmul mm(&alloc);
  mm.set_autotune(a.gemm_autotune);
  mm.set_bias_grad_epilogue(a.bias_grad_epilogue);
  cuda::DeviceReplicatedState<T> st = bench::initial_state<T>(layout, &alloc, stream);
  GPTOptions opt;
  opt.max_batch = a.batch;
  opt.max_seq = a.seq;
  opt.activation_checkpointing = a.checkpointing;
  opt.recompute = parse_recompute(a.recompute);
  opt.attention_ds_budget =
      a.attention_ds_in_l2 ? bench::attention_ds_in_l2_budget() : int64_t(a.attention_ds_mib) << 20;
  opt.attention_wide_forward = a.attention_wide_forward;
  opt.attention_cudnn = a.attention_cudnn;
  cuda::DeviceGPT<T> m(layout, opt, &alloc, &mm, stream);

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, cfg.vocab_size - 1);
  std::vector<int32_t> tokens(size_t(a.batch) * a.seq + 1);
  for (auto& t : tokens) t = tok(rng);
  const float scale = 1.f / float(int64_t(a.batch) * a.seq);
  const AdamWHyper h;
  cudaEvent_t t0, t1;
  GPT_CUDA_OK(cudaEventCreate(&t0));
  GPT_CUDA_OK(cudaEventCreate(&t1));
  // Phase boundaries: phase i of step s runs from mark[s % 2][i] to
  // mark[s % 2][i + 1]. Two sets: step s's are read once step s + 1's norm
  // has made the host wait for its backward, so after step s's optimizer.
  std::array<std::array<cudaEvent_t, kPhases + 1>, 2> mark;
  for (auto& set : mark)
    for (auto& e : set) GPT_CUDA_OK(cudaEventCreate(&e));
  std::array<double, kPhases> phase_ms{};
  double loss = 0;
  const auto& P = st.params();
  const auto& G = st.grads();
  const int L = cfg.n_layer;
  auto add_phases = [&](int s) {  // step s's marks have completed
    if (s < a.warmup) return;
    for (int i = 0; i < kPhases; ++i) {
      float elapsed = 0;
      GPT_CUDA_OK(cudaEventElapsedTime(&elapsed, mark[s % 2][i], mark[s % 2][i + 1]));
      phase_ms[i] += elapsed;
    }
  };
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    if (s == a.warmup) {
      tracker.reset_peak();
      GPT_CUDA_OK(cudaEventRecord(t0, stream));
    }
    auto& mk = mark[s % 2];
    GPT_CUDA_OK(cudaEventRecord(mk[0], stream));
    st.zero_grads();
    m.set_batch(tokens.data(), tokens.data() + 1);
    m.forward_embedding(P[layout.embedding_unit()]);
    for (int l = 0; l < L; ++l) m.forward_block(l, P[layout.block_unit(l)]);
    GPT_CUDA_OK(cudaEventRecord(mk[1], stream));
    m.forward_head(P[layout.final_unit()], P[layout.embedding_unit()], G[layout.embedding_unit()], scale);
    GPT_CUDA_OK(cudaEventRecord(mk[2], stream));
    m.backward_final(P[layout.final_unit()], G[layout.final_unit()]);
    for (int l = L - 1; l >= 0; --l) m.backward_block(l, P[layout.block_unit(l)], G[layout.block_unit(l)]);
    m.backward_embedding(G[layout.embedding_unit()]);
    GPT_CUDA_OK(cudaEventRecord(mk[3], stream));
    // The host waits as the trainer's does: for the norm (the clip scale)
    // and the loss, both before the optimizer step is queued, so the next
    // step's host work overlaps the optimizer's kernels.
    const double norm = st.grad_norm();
    loss = m.take_loss();
    if (s > 0) add_phases(s - 1);
    st.step(h, {3e-4f, s + 1, clip_scale(norm, 1.f)});
    GPT_CUDA_OK(cudaEventRecord(mk[4], stream));
  }
  GPT_CUDA_OK(cudaEventRecord(t1, stream));
  GPT_CUDA_OK(cudaEventSynchronize(t1));
  add_phases(a.warmup + a.steps - 1);
  float ms = 0;
  GPT_CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
  const double step_s = ms / 1e3 / a.steps;
  const double tok_s = double(a.batch) * a.seq / step_s;
  const cuda::DeviceInfo info = cuda::device_info(0);
  const std::string& dev = info.name;
  const bool bf16 = a.precision == "bf16";
  const double peak = gpu_peak_flops(dev, bf16, info.sms);  // a MIG instance: its share of the GPU's
  const double mfu = peak > 0 ? train_flops_per_token(cfg, a.seq) * tok_s / peak : 0;
  std::string impl = a.recompute == "none" ? std::string("ours") : "ours-recompute-" + a.recompute;
  if (a.gemm_autotune > 1) impl += "-autotune";
  if (a.attention_ds_mib > 0) impl += "-stored-ds";
  if (a.attention_ds_in_l2) impl += "-ds-in-l2";
  if (a.attention_wide_forward) impl += "-wide-fwd";
  if (a.attention_cudnn) impl += "-cudnn-attention";
  if (a.bias_grad_epilogue) impl += "-bgradb";
  nlohmann::json j = {{"impl", impl}, {"gemm_autotune", a.gemm_autotune},
                      {"attention_ds_mib", opt.attention_ds_budget >> 20},
                      {"attention_ds_bytes", bf16 ? attention_ds_bytes(a.batch, a.seq, cfg.n_head,
                                                                       opt.attention_ds_budget) : 0},
                      {"attention_wide_forward", a.attention_wide_forward},
                      {"attention_cudnn", a.attention_cudnn},
                      {"bias_grad_epilogue", a.bias_grad_epilogue},
                      {"device", dev}, {"model", a.model}, {"precision", a.precision},
                      {"batch", a.batch}, {"seq", a.seq}, {"steps", a.steps}, {"activation_checkpointing", a.checkpointing},
                      {"recompute", a.recompute},
                      {"tokens_per_s", tok_s}, {"step_ms", step_s * 1e3}, {"mfu", mfu}, {"final_loss", loss},
                      {"flops_per_token", train_flops_per_token(cfg, a.seq)},
                      {"mem_peak_bytes", tracker.peak()}, {"mem_reserved_bytes", alloc.reserved()},
                      {"mem_params_bytes", tracker.bytes(MemCategory::kParams)},
                      {"mem_grads_bytes", tracker.bytes(MemCategory::kGrads)},
                      {"mem_optim_bytes", tracker.bytes(MemCategory::kOptim)},
                      {"mem_activations_bytes", tracker.bytes(MemCategory::kActivations)},
                      {"cudamalloc_calls", alloc.malloc_calls()}};
  std::printf("# %-12s %-5s B=%-3d T=%-5d %10.0f tok/s  %7.2f ms/step  MFU %5.1f%%  peak %s  (%s)\n",
              a.model.c_str(), a.precision.c_str(), a.batch, a.seq, tok_s, step_s * 1e3, 100 * mfu,
              format_bytes(double(tracker.peak())).c_str(), dev.c_str());
  // Model FLOPs of each phase per token (model/flops.hpp; the optimizer has none).
  const StepFlops f = step_flops_per_token(cfg, a.seq);
  const std::array<double, kPhases> phase_flops_tok{f.blocks_forward, f.head, f.blocks_backward, 0.0};
  const double tokens_per_step = double(a.batch) * a.seq;
  nlohmann::json phases = nlohmann::json::array();
  std::printf("#   %-10s %9s %7s %9s\n", "phase", "ms/step", "share", "TFLOP/s");
  for (int i = 0; i < kPhases; ++i) {
    const double phase = phase_ms[i] / a.steps;
    const double tflops = phase > 0 ? phase_flops_tok[i] * tokens_per_step / (phase * 1e-3) / 1e12 : 0;
    const double share = step_s > 0 ? phase / (step_s * 1e3) : 0;
    phases.push_back({{"phase", kPhaseNames[i]},
                      {"ms", phase},
                      {"share", share},
                      {"flops", phase_flops_tok[i] * tokens_per_step},
                      {"tflops", tflops}});
    std::printf("    %-10s %9.3f %6.1f%% %9.1f\n", kPhaseNames[i], phase, 100 * share, tflops);
  }
  j["phases"] = phases;
  if (!mm.tune_results().empty()) {
    nlohmann::json tune = nlohmann::json::array();
    double first = 0, best = 0;
    for (const auto& t : mm.tune_results()) {
      tune.push_back({{"m", t.m}, {"n", t.n}, {"k", t.k}, {"epilogue", t.epilogue}, {"candidates", t.candidates},
                      {"timed", t.timed}, {"picked", t.picked}, {"first_ms", t.first_ms}, {"best_ms", t.best_ms}});
      if (t.picked >= 0 && t.first_ms >= 0) {
        first += t.first_ms;
        best += t.best_ms;
      }
    }
    j["gemm_tune"] = tune;
    std::printf("# GEMM autotune: %zu shapes, the fastest of up to %d algorithms; summed over one call of each: "
                "%.3f ms (the heuristic's first picks) -> %.3f ms\n",
                mm.tune_results().size(), a.gemm_autotune, first, best);
  }
  for (auto& set : mark)
    for (auto& e : set) cudaEventDestroy(e);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Single-GPU training throughput of the CUDA backend"};
  bench::add_shape_options(app, a, true);
  app.add_option("--steps", a.steps, "timed steps")->check(gpt::kPositiveInt);
  app.add_option("--warmup", a.warmup, "untimed steps first")->check(gpt::kNonNegativeInt);
  app.add_flag("--activation-checkpointing", a.checkpointing, "keep block inputs only, recompute blocks");
  app.add_option("--recompute", a.recompute, "activations recomputed in backward: none | gelu | gelu-ln")
      ->capture_default_str()->check(CLI::IsMember({"none", "gelu", "gelu-ln"}));
  app.add_option("--gemm-autotune", a.gemm_autotune,
                 "time up to N cuBLASLt algorithms per GEMM shape in the first step and keep the fastest (0: the "
                 "heuristic's first pick)")
      ->capture_default_str()->check(CLI::Range(0, 64));
  app.add_option("--attention-ds-mib", a.attention_ds_mib,
                 "MiB for the attention backward's stored score gradients (dQ in one product; 0: recomputed), as "
                 "gpt_train's flag")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_flag("--attention-ds-in-l2", a.attention_ds_in_l2,
               "budget the stored score gradients at three quarters of the GPU's L2 (chunks whose dS the dQ launch "
               "reads from L2)")
      ->excludes("--attention-ds-mib");
  app.add_flag("--attention-wide-forward", a.attention_wide_forward,
               "attention forward on 128-query tiles instead of 64 (bf16)");
  app.add_flag("--attention-cudnn", a.attention_cudnn, "cuDNN's fused attention (bf16; gpt_train --attention cudnn)")
      ->excludes("--attention-ds-mib")
      ->excludes("--attention-ds-in-l2")
      ->excludes("--attention-wide-forward");
  app.add_flag("--bias-grad-epilogue", a.bias_grad_epilogue,
               "bias gradients in the dW products' cuBLASLt epilogue (BGRADB) instead of their own kernel");
  CLI11_PARSE(app, argc, argv);
  return bench::run_on_gpu([&] { return a.precision == "bf16" ? run<cuda::bf16>(a) : run<float>(a); });
}
