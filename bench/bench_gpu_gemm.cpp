// Every matrix product of a training step, each timed alone at the model's
// shapes through the backend's Matmul (cuBLASLt, the epilogues the model
// uses), so a step's GEMM time can be read product by product and set
// against PyTorch's plain GEMM at the same shape (bench/torch_gpu_gemm.py
// reads this program's JSON for the shapes; bench/gpu_vs_torch.sh runs both).
//
// Per linear layer of a block (qkv, attention projection, MLP fc and
// projection) and for one chunk of the LM head (default_chunk_rows rows):
//   fwd   out[N, OC] = x[N, C] W^T with the layer's epilogue (bias; bias and
//         the residual; bias and GELU with the pre-activation saved);
//   dinp  dx[N, C] = dout W (after the MLP projection: times GELU');
//   dW    dW[OC, C] += dout^T x.
// The GELU products run twice: fused into cuBLASLt's epilogue and with the
// separate GELU kernel; `fused` says which path ran (cuBLASLt may refuse the
// fusion, or the Matmul's check of its GELU, gelu_epilogue_check.hpp, can
// turn it off; the verdict is in the JSON as gelu_epilogue). FLOPs = 2*N*C*OC; epilogues and the GELU
// kernel are inside the time. The bias gradients (a separate kernel,
// model/cuda/bias_grad.hpp) are timed on their own, per layer with a bias,
// reading 16-byte vectors and one element per lane, with GB/s of dout read
// (JSON: bias_grad; torch_gpu_gemm.py times PyTorch's dout.sum(0) beside them).
//
//   bench_gpu_gemm [--model gpt2-124m] [--batch 16] [--seq 1024]
//                  [--precision bf16|fp32] [--iters 20]
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_bench.hpp"
#include "core/cuda/device_memory.hpp"
#include "core/cuda/device_query.hpp"
#include "core/cuda/stream.hpp"
#include "model/config.hpp"
#include "model/cuda/bias_grad.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/elementwise.hpp"
#include "model/cuda/gpt_cuda.hpp"
#include "model/cuda/matmul.hpp"

namespace {

using namespace gpt;

struct Args : bench::Shape {
  int iters = 20;
};

enum class Epilogue { kBias, kResidual, kGelu, kNone };
enum class Pass { kFwd, kDinp, kDw };

struct Layer {
  const char* op;
  int64_t N, C, OC;  // x[N, C] -> out[N, OC]
  Epilogue epi;
  bool dgelu = false;  // its input is a GELU output: dinp takes GELU' (the MLP projection)
};

struct Case {
  const Layer* layer;
  Pass pass;
  bool gelu;   // this pass applies GELU or its gradient
  bool fused;  // ... asked fused into the GEMM (else the GELU kernel)
};

const char* pass_name(Pass p) { return p == Pass::kFwd ? "fwd" : p == Pass::kDinp ? "dinp" : "dW"; }

std::string epilogue_name(const Case& c) {
  if (c.pass == Pass::kDw) return "accumulate";
  if (c.gelu) return std::string(c.pass == Pass::kFwd ? "bias+GELU" : "GELU'") + (c.fused ? " (fused)" : " (kernel)");
  if (c.pass == Pass::kDinp) return "none";
  switch (c.layer->epi) {
    case Epilogue::kBias: return "bias";
    case Epilogue::kResidual: return "bias+residual";
    default: return "none";
  }
}

// The GEMM's own m, n, k (row-major: [m, k] x [k, n]).
std::array<int64_t, 3> mnk(const Layer& l, Pass p) {
  if (p == Pass::kFwd) return {l.N, l.OC, l.C};
  if (p == Pass::kDinp) return {l.N, l.C, l.OC};
  return {l.OC, l.C, l.N};
}

// Uniform values in [-1, 1): 1M random numbers on the device, converted
// into each buffer block by block (the GEMMs' speed does not depend on the
// values; generating or staging hundreds of millions would).
class Filler {
 public:
  Filler(cuda::DeviceAllocator* alloc, cudaStream_t s) : s_(s) {
    std::vector<float> host(size_t(1) << 20);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (float& v : host) v = u(rng);
    block_ = cuda::DeviceBuffer<float>(host.size(), MemCategory::kScratch, alloc);
    GPT_CUDA_OK(cudaMemcpy(block_.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  template <typename T>
  void fill(cuda::DeviceBuffer<T>& b) {
    const int64_t n = int64_t(b.size()), block = int64_t(block_.size());
    for (int64_t i = 0; i < n; i += block) cuda::convert(b.data() + i, block_.data(), std::min(block, n - i), s_);
  }

 private:
  cudaStream_t s_;
  cuda::DeviceBuffer<float> block_;
};

template <typename T>
nlohmann::json time_case(const Case& c, cuda::Matmul& mm, Filler& fill, cuda::DeviceAllocator* alloc, int iters,
                         cudaStream_t s) {
  const Layer& l = *c.layer;
  const auto A = MemCategory::kActivations;
  cuda::DeviceBuffer<T> x(l.N * l.C, A, alloc), w(l.OC * l.C, A, alloc), bias(l.OC, A, alloc);
  cuda::DeviceBuffer<T> out(l.N * l.OC, A, alloc), side(l.N * l.OC, A, alloc);  // side: residual or GELU output
  cuda::DeviceBuffer<T> dout(l.N * l.OC, A, alloc), dx(l.N * l.C, A, alloc), dw(l.OC * l.C, A, alloc);
  cuda::DeviceBuffer<T> pre(c.pass == Pass::kDinp && c.gelu ? l.N * l.C : 0, A, alloc);  // GELU's input, for GELU'
  for (auto* buf : {&x, &w, &bias, &side, &dout, &pre}) fill.fill(*buf);
  dw.zero(s);
  const T* b = l.epi == Epilogue::kNone ? nullptr : bias.data();
  mm.set_fusion(c.fused);
  const int64_t fused_before = mm.fused_gelu_calls();
  auto run = [&] {
    switch (c.pass) {
      case Pass::kFwd:
        if (l.epi == Epilogue::kResidual)
          mm.linear_residual_forward(out.data(), x.data(), w.data(), b, side.data(), l.N, l.C, l.OC, s);
        else
          mm.linear_forward(out.data(), x.data(), w.data(), b, l.N, l.C, l.OC, s, c.gelu ? side.data() : nullptr);
        break;
      case Pass::kDinp:
        mm.linear_backward<T>(dx.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), l.N, l.C, l.OC, s,
                              c.gelu ? pre.data() : nullptr);
        break;
      case Pass::kDw:
        mm.linear_backward<T>(nullptr, dw.data(), nullptr, dout.data(), x.data(), w.data(), l.N, l.C, l.OC, s);
        break;
    }
  };
  const double ms = bench::time_ms(run, iters, s);  // the warm-up builds plans and chooses algorithms
  const bool fused = c.gelu && mm.fused_gelu_calls() > fused_before;
  mm.set_fusion(true);
  const auto [m, n, k] = mnk(l, c.pass);
  const double tflops = ms > 0 ? 2.0 * double(m) * double(n) * double(k) / (ms * 1e-3) / 1e12 : 0;
  nlohmann::json row = {{"op", l.op}, {"pass", pass_name(c.pass)}, {"epilogue", epilogue_name(c)},
                        {"N", l.N},   {"C", l.C},                   {"OC", l.OC},
                        {"m", m},     {"n", n},                     {"k", k},
                        {"bias", c.pass == Pass::kFwd && b != nullptr}, {"ms", ms}, {"tflops", tflops}};
  row["fused"] = c.gelu ? nlohmann::json(fused) : nlohmann::json(nullptr);
  std::printf("  %-8s %-5s %-18s %7lld %6lld %6lld %9.3f %9.1f\n", l.op, pass_name(c.pass), epilogue_name(c).c_str(),
              (long long)m, (long long)n, (long long)k, ms, tflops);
  return row;
}

// dbias += column sums of dout[N, OC] for one layer, at width 0 (the
// launcher's choice: 16-byte vectors at these shapes) or 1.
template <typename T>
nlohmann::json time_bias_grad(const Layer& l, int width, Filler& fill, cuda::DeviceAllocator* alloc, int iters,
                              cudaStream_t s) {
  const auto A = MemCategory::kActivations;
  cuda::DeviceBuffer<T> dout(l.N * l.OC, A, alloc), db(l.OC, A, alloc);
  cuda::DeviceBuffer<float> scratch(size_t(cuda::bias_grad_scratch(l.N, l.OC)), MemCategory::kScratch, alloc);
  cuda::DeviceBuffer<unsigned> arrivals(size_t(cuda::bias_grad_arrivals(l.OC)), MemCategory::kScratch, alloc);
  GPT_CUDA_OK(cudaMemsetAsync(arrivals.data(), 0, arrivals.size() * sizeof(unsigned), s));
  fill.fill(dout);
  int elems = 0;  // what the launcher chose
  const double ms = bench::time_ms(
      [&] {
        elems = cuda::bias_grad(db.data(), dout.data(), scratch.data(), arrivals.data(), l.N, l.OC, s, width);
      },
      iters, s);
  const double bytes = double(l.N) * double(l.OC) * sizeof(T);
  const double gbps = ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0;
  std::printf("  %-8s %7lld %6lld %6d %9.3f %9.1f\n", l.op, (long long)l.N, (long long)l.OC, elems, ms, gbps);
  return {{"op", l.op}, {"N", l.N}, {"OC", l.OC}, {"elements_per_lane", elems}, {"ms", ms}, {"gbps", gbps}};
}

template <typename T>
nlohmann::json run(const Args& a) {
  const GPTConfig cfg = preset(a.model);
  const int64_t N = int64_t(a.batch) * a.seq, C = cfg.n_embd, Vp = cfg.padded_vocab();
  const int64_t rows = std::min(N, cuda::default_chunk_rows(Vp, sizeof(T)));
  const Layer layers[] = {{"qkv", N, C, 3 * C, Epilogue::kBias},
                          {"attproj", N, C, C, Epilogue::kResidual},
                          {"fc", N, C, 4 * C, Epilogue::kGelu},
                          {"fcproj", N, 4 * C, C, Epilogue::kResidual, true},
                          {"lm_head", rows, C, Vp, Epilogue::kNone}};
  std::vector<Case> cases;
  for (const Layer& l : layers) {
    for (Pass p : {Pass::kFwd, Pass::kDinp, Pass::kDw}) {
      const bool gelu = (p == Pass::kFwd && l.epi == Epilogue::kGelu) || (p == Pass::kDinp && l.dgelu);
      cases.push_back({&l, p, gelu, true});
      if (gelu) cases.push_back({&l, p, gelu, false});
    }
  }

  const cuda::Stream owner;  // first: destroyed after everything that uses it
  const cudaStream_t stream = owner.get();
  MemoryTracker tracker;
  cuda::DeviceAllocator alloc(&tracker);
  cuda::Matmul mm(&alloc);
  Filler fill(&alloc, stream);
  const std::string dev = cuda::device_name(0);
  std::printf("# GEMMs of %s, %s, B=%d T=%d (N=%lld, LM head chunk %lld rows) on %s\n", a.model.c_str(),
              a.precision.c_str(), a.batch, a.seq, (long long)N, (long long)rows, dev.c_str());
  std::printf("# %-8s %-5s %-18s %7s %6s %6s %9s %9s\n", "op", "pass", "epilogue", "m", "n", "k", "ms", "TFLOP/s");
  nlohmann::json out = nlohmann::json::array();
  for (const Case& c : cases) out.push_back(time_case<T>(c, mm, fill, &alloc, a.iters, stream));
  std::printf("# bias gradients (column sums of dout; GB/s of dout read)\n");
  std::printf("# %-8s %7s %6s %6s %9s %9s\n", "op", "N", "OC", "elems", "ms", "GB/s");
  nlohmann::json bias = nlohmann::json::array();
  for (const Layer& l : layers) {
    if (l.epi == Epilogue::kNone) continue;  // the LM head has no bias
    for (int width : {0, 1}) bias.push_back(time_bias_grad<T>(l, width, fill, &alloc, a.iters, stream));
  }
  // What cuBLASLt's GELU epilogues compute on this GPU (checked before the
  // first fused GELU above): whether fusion was allowed, and why.
  const cuda::GeluEpilogueCheck& g = mm.gelu_check<T>();
  const bool is_bf16 = std::is_same_v<T, cuda::bf16>;
  std::printf("# %s\n", cuda::describe(g, is_bf16).c_str());
  const nlohmann::json check = {{"result", cuda::to_string(g.result)},
                                {"forward_error", g.forward_error},
                                {"backward_error", g.backward_error},
                                {"pre_activation_exact", g.pre_activation_exact},
                                {"closest", g.closest},
                                {"summary", cuda::describe(g, is_bf16)}};
  return {{"results", out}, {"gelu_epilogue", check}, {"bias_grad", bias}};
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"The matrix products of a training step through cuBLASLt, one by one"};
  bench::add_shape_options(app, a, true);
  app.add_option("--iters", a.iters, "timed calls of each product")->check(gpt::kPositiveInt);
  CLI11_PARSE(app, argc, argv);
  return bench::run_on_gpu([&] {
    const nlohmann::json r = a.precision == "bf16" ? run<cuda::bf16>(a) : run<float>(a);
    return nlohmann::json{{"bench", "gemm"},         {"device", cuda::device_name(0)}, {"model", a.model},
                          {"precision", a.precision}, {"batch", a.batch},               {"seq", a.seq},
                          {"iters", a.iters},         {"results", r["results"]},       {"gelu_epilogue", r["gelu_epilogue"]},
                          {"bias_grad", r["bias_grad"]}};
  });
}
