// The CPU attention (model/cpu/attention.cpp: flash-style, a log-sum-exp per
// row saved, probabilities recomputed in backward from 64-query blocks) side
// by side with the materialised form it replaced (the T x T probabilities
// written in forward and read back in backward, triangular products), at
// gpt2-124m's head shape (--heads: how many). Both run on the same inputs, interleaved, every
// repetition; the outputs and gradients are compared. Reports the medians
// and what each keeps for backward. Prints a '#'-commented table, then one
// JSON line per row.
//   attention_cpu [--reps N] [--threads N] [--heads N] [--json FILE]
#include <omp.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "../apps/command_line.hpp"  // kPositiveInt: the ranges named as integers
#include "json_lines.hpp"

#include "core/host_heap.hpp"
#include "core/memory.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "model/cpu/attention.hpp"
#include "model/cpu/eigen_maps.hpp"

namespace {

using namespace gpt;
using namespace gpt::cpu;

// The materialised baseline: att[B, NH, T, T] kept for backward (zero above
// the diagonal); scratch T x T per thread for the probabilities' gradient.
void materialised_forward(float* out, float* att, const float* qkv, const AttentionShape& s) {
  const int64_t Tn = s.T, C = s.C, hs = C / s.NH;
  const float scale = 1.f / std::sqrt(float(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
    const int64_t b = bh / s.NH, h = bh % s.NH;
    const float* base = qkv + b * Tn * 3 * C + h * hs;
    const Eigen::OuterStride<> st3(3 * C);
    CMapRS<float> q(base, Tn, hs, st3), k(base + C, Tn, hs, st3), v(base + 2 * C, Tn, hs, st3);
    MapR<float> p(att + bh * Tn * Tn, Tn, Tn);
    p.noalias() = q * k.transpose();
    for (int64_t i = 0; i < Tn; ++i) {
      ArrMap<float> r(p.row(i).data(), i + 1);
      const float mx = r.maxCoeff() * scale;
      r = (r * scale - mx).exp();
      r *= 1.f / r.sum();
      std::fill(p.row(i).data() + i + 1, p.row(i).data() + Tn, 0.f);
    }
    MapRS<float> y(out + b * Tn * C + h * hs, Tn, hs, Eigen::OuterStride<>(C));
    y.noalias() = p.triangularView<Eigen::Lower>() * v;
  }
}

void materialised_backward(float* dqkv, const float* dout, const float* qkv, const float* att, float* scratch,
                           const AttentionShape& s) {
  const int64_t Tn = s.T, C = s.C, hs = C / s.NH;
  const float scale = 1.f / std::sqrt(float(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
    const int64_t b = bh / s.NH, h = bh % s.NH, off = b * Tn * 3 * C + h * hs;
    const Eigen::OuterStride<> st3(3 * C);
    CMapRS<float> q(qkv + off, Tn, hs, st3), k(qkv + off + C, Tn, hs, st3), v(qkv + off + 2 * C, Tn, hs, st3);
    MapRS<float> dq(dqkv + off, Tn, hs, st3), dk(dqkv + off + C, Tn, hs, st3), dv(dqkv + off + 2 * C, Tn, hs, st3);
    CMapRS<float> dy(dout + b * Tn * C + h * hs, Tn, hs, Eigen::OuterStride<>(C));
    CMapR<float> p(att + bh * Tn * Tn, Tn, Tn);
    MapR<float> ds(scratch + omp_get_thread_num() * Tn * Tn, Tn, Tn);
    dv.noalias() = p.transpose().triangularView<Eigen::Upper>() * dy;
    ds.noalias() = dy * v.transpose();
    for (int64_t i = 0; i < Tn; ++i) {
      Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>> pr(p.row(i).data(), i + 1);
      ArrMap<float> dr(ds.row(i).data(), i + 1);
      const float dot = (pr * dr).sum();
      dr = pr * (dr - dot) * scale;
      std::fill(ds.row(i).data() + i + 1, ds.row(i).data() + Tn, 0.f);
    }
    dq.noalias() = ds.triangularView<Eigen::Lower>() * k;
    dk.noalias() = ds.transpose().triangularView<Eigen::Upper>() * q;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double rel_diff(const Buffer<float>& a, const Buffer<float>& b) {
  double e = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += double(a[i] - b[i]) * double(a[i] - b[i]);
    n += double(b[i]) * double(b[i]);
  }
  return std::sqrt(e / n);
}

Buffer<float> buffer(int64_t n) { return Buffer<float>(size_t(n), MemCategory::kScratch, nullptr); }

std::vector<nlohmann::json> run(int64_t B, int64_t T, int64_t heads, int reps) {
  const AttentionShape s{B, T, 64 * heads, heads};  // heads of 64, as gpt2-124m's 12
  const int threads = omp_get_max_threads();
  Buffer<float> qkv = buffer(B * T * 3 * s.C), dy = buffer(B * T * s.C);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = nd(rng);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = nd(rng);
  Buffer<float> out_m = buffer(B * T * s.C), out_f = buffer(B * T * s.C);
  Buffer<float> dqkv_m = buffer(B * T * 3 * s.C), dqkv_f = buffer(B * T * 3 * s.C);
  Buffer<float> att = buffer(B * s.NH * T * T), scratch_m = buffer(T * T * threads);
  Buffer<float> lse = buffer(B * s.NH * T), scratch_f = buffer(attention_scratch(T, s.NH, threads));
  std::vector<double> fm, bm, ff, bf;
  for (int rep = 0; rep <= reps; ++rep) {  // repetition 0 warms up
    Timer t;
    materialised_forward(out_m.data(), att.data(), qkv.data(), s);
    const double t1 = t.seconds();
    materialised_backward(dqkv_m.data(), dy.data(), qkv.data(), att.data(), scratch_m.data(), s);
    const double t2 = t.seconds();
    attention_forward(out_f.data(), lse.data(), qkv.data(), scratch_f.data(), threads, s);
    const double t3 = t.seconds();
    attention_backward(dqkv_f.data(), dy.data(), qkv.data(), lse.data(), scratch_f.data(), threads, s);
    const double t4 = t.seconds();
    if (rep == 0) continue;
    fm.push_back(t1);
    bm.push_back(t2 - t1);
    ff.push_back(t3 - t2);
    bf.push_back(t4 - t3);
  }
  const double d_out = rel_diff(out_f, out_m), d_grad = rel_diff(dqkv_f, dqkv_m);
  auto row = [&](const char* impl, double f, double b, double kept, double scratch) {
    return nlohmann::json{{"impl", impl},           {"B", B},
                          {"T", T},                 {"n_head", s.NH},
                          {"head_size", s.C / s.NH}, {"threads", threads},
                          {"reps", reps},           {"forward_s", f},
                          {"backward_s", b},        {"kept_bytes", kept},
                          {"scratch_bytes", scratch}, {"rel_diff_out", d_out},
                          {"rel_diff_dqkv", d_grad}};
  };
  return {row("materialised", median(fm), median(bm), 4.0 * double(att.size()), 4.0 * double(scratch_m.size())),
          row("flash", median(ff), median(bf), 4.0 * double(lse.size()), 4.0 * double(scratch_f.size()))};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attention_cpu: the CPU's flash-style attention against the materialised T x T form, side by side"};
  int reps = 5, threads = 0, heads = 12;
  std::string json_path;
  app.add_option("--reps", reps, "timed repetitions (median; one more warms up)")->check(gpt::kPositiveInt);
  app.add_option("--threads", threads, "threads (0: OpenMP default)");
  app.add_option("--heads", heads, "heads of 64 (12: gpt2-124m's; fewer than --threads shows the forward's "
                 "split of a head's query blocks across threads)")->capture_default_str()->check(gpt::kPositiveInt);
  app.add_option("--json", json_path, "also write the JSON lines here");
  CLI11_PARSE(app, argc, argv);
  keep_large_heap_blocks();  // as gpt_train (core/host_heap.hpp)
  set_num_threads(threads);
  std::printf("# attention_cpu: %d heads of 64 (gpt2-124m: 12), %d threads, medians of %d interleaved runs\n",
              heads, num_threads(), reps);
  std::printf("# %5s %5s %-13s %10s %10s %10s %12s %12s\n", "B", "T", "impl", "fwd s", "bwd s", "fwd+bwd", "kept MiB",
              "scratch MiB");
  std::vector<nlohmann::json> results;
  for (auto [B, T] : {std::pair<int64_t, int64_t>{4, 256}, {1, 1024}, {4, 1024}}) {
    const auto rows = run(B, T, heads, reps);
    for (const auto& r : rows) {
      const double f = r["forward_s"], b = r["backward_s"];
      std::printf("  %5ld %5ld %-13s %10.4f %10.4f %10.4f %12.1f %12.1f\n", long(B), long(T),
                  r["impl"].get<std::string>().c_str(), f, b, f + b, r["kept_bytes"].get<double>() / 1048576.0,
                  r["scratch_bytes"].get<double>() / 1048576.0);
      results.push_back(r);
    }
    std::printf("# B=%ld T=%ld: flash vs materialised: relative difference %.1e (out), %.1e (dqkv)\n", long(B),
                long(T), rows[0]["rel_diff_out"].get<double>(), rows[0]["rel_diff_dqkv"].get<double>());
  }
  bench::print_json_lines(results, json_path);
  return 0;
}
