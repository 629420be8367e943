#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "core/error.hpp"
#include "model/adamw.hpp"
#include "model/flops.hpp"
#include "model/init.hpp"
#include "model/layout.hpp"
#include "model/schedule.hpp"

namespace gpt {
namespace {

TEST(Layout, Gpt2SizesMatchThePublishedModels) {
  // Parameter counts of OpenAI's checkpoints (tied head, wpe included).
  EXPECT_EQ(ParamLayout(preset("gpt2-124m")).model_numel(), 124439808);
  EXPECT_EQ(ParamLayout(preset("gpt2-350m")).model_numel(), 354823168);
  EXPECT_EQ(ParamLayout(preset("gpt2-774m")).model_numel(), 774030080);
  EXPECT_EQ(ParamLayout(preset("gpt2-1.5b")).model_numel(), 1557611200);
  EXPECT_EQ(preset("gpt2-124m").padded_vocab(), 50304);
}

TEST(Layout, UnitsAreContiguousAndNamedLikeNanoGPT) {
  ParamLayout L(preset("tiny"));
  ASSERT_EQ(L.num_units(), size_t(preset("tiny").n_layer + 2));
  int64_t total = 0;
  for (const UnitSpec& u : L.units()) {
    int64_t off = 0;
    for (const TensorSpec& t : u.tensors) {
      EXPECT_EQ(t.offset, off) << t.name;
      off += t.numel;
    }
    EXPECT_EQ(off, u.numel);
    total += u.numel;
  }
  EXPECT_EQ(total, L.total_numel());
  EXPECT_EQ(L.unit(1).tensors[2].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(L.unit(1).tensors[2].shape, (std::vector<int64_t>{3 * 128, 128}));
  EXPECT_EQ(L.unit(L.final_unit()).tensors[0].name, "transformer.ln_f.weight");
}

TEST(Init, AnySliceEqualsTheSameSliceOfTheWholeUnit) {
  ParamLayout L(GPTConfig{2, 2, 16, 8, 100});
  for (const UnitSpec& u : L.units()) {
    std::vector<float> whole(u.numel);
    init_unit(u, 42, whole.data());
    for (int64_t parts : {3, 7}) {  // uneven shards cutting through tensors
      const int64_t step = (u.numel + parts - 1) / parts;
      for (int64_t b = 0; b < u.numel; b += step) {
        const int64_t e = std::min(u.numel, b + step);
        std::vector<float> piece(e - b);
        init_unit_range(u, 42, b, e, piece.data());
        for (int64_t i = b; i < e; ++i) ASSERT_EQ(piece[i - b], whole[i]) << u.name << " element " << i;
      }
    }
  }
}

TEST(Init, Gpt2SchemeStatistics) {
  GPTConfig c{4, 4, 128, 64, 256};
  ParamLayout L(c);
  std::vector<float> blk(L.unit(1).numel);
  init_unit(L.unit(1), 1, blk.data());
  auto stdev = [&](const TensorSpec& t) {
    double s = 0;
    for (int64_t i = 0; i < t.numel; ++i) s += double(blk[t.offset + i]) * blk[t.offset + i];
    return std::sqrt(s / t.numel);
  };
  const auto& ts = L.unit(1).tensors;
  EXPECT_NEAR(stdev(ts[2]), 0.02, 0.0005);                         // c_attn.weight
  EXPECT_NEAR(stdev(ts[4]), 0.02 / std::sqrt(2.0 * 4), 0.0004);    // attn.c_proj.weight: scaled
  EXPECT_EQ(blk[ts[0].offset], 1.f);                               // ln_1.weight
  EXPECT_EQ(blk[ts[1].offset], 0.f);                               // ln_1.bias
  // Different seeds give different weights; the same seed the same.
  std::vector<float> again(L.unit(1).numel), other(L.unit(1).numel);
  init_unit(L.unit(1), 1, again.data());
  init_unit(L.unit(1), 2, other.data());
  EXPECT_EQ(blk, again);
  EXPECT_NE(blk, other);
}

TEST(Schedule, WarmupThenCosineToMinLr) {
  LRSchedule s{1.0f, 0.1f, 10, 110};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);
  EXPECT_NEAR(s.at(60), 0.55f, 1e-6);
  EXPECT_NEAR(s.at(110), 0.1f, 1e-6);
  EXPECT_NEAR(s.at(500), 0.1f, 1e-6);
}

// Ratio 1 (the default) is the schedule as it was before the ratio existed,
// bit for bit: resumed runs and golden files keep their learning rates.
TEST(Schedule, RatioOneIsTheClassicCosineBitForBit) {
  for (int warmup : {0, 1, 7, 50}) {
    for (int total : {1, 2, 51, 100}) {
      LRSchedule s{6e-4f, 6e-5f, warmup, total};
      for (int step = 0; step < total + 5; ++step) {
        float expect;
        if (step < warmup) {
          expect = 6e-4f * float(step + 1) / float(warmup);
        } else {
          const double p = std::min(1.0, double(step - warmup) / std::max(1, total - warmup));
          expect = float(6e-5f + 0.5 * (1.0 + std::cos(std::numbers::pi * p)) * (6e-4f - 6e-5f));
        }
        EXPECT_EQ(s.at(step), expect) << "warmup " << warmup << " total " << total << " step " << step;
      }
    }
  }
}

// Warmup-stable-decay: warm-up 10, then 100 more steps of which the last 20
// (ratio 0.2) decay; each shape at the decay's start, middle and end.
TEST(Schedule, WarmupStableDecayShapes) {
  auto wsd = [](LRDecay d) { return LRSchedule{1.0f, 0.1f, 10, 110, d, 0.2}; };
  const LRSchedule lin = wsd(LRDecay::kLinear);
  EXPECT_EQ(lin.decay_start(), 90);
  EXPECT_FLOAT_EQ(lin.at(4), 0.5f);  // still warming up
  for (int step = 9; step <= 90; ++step) EXPECT_EQ(lin.at(step), 1.0f) << step;
  EXPECT_FLOAT_EQ(lin.at(91), 1.0f - 0.9f / 20);
  EXPECT_FLOAT_EQ(lin.at(100), 0.55f);
  EXPECT_FLOAT_EQ(lin.at(109), 0.1f + 0.9f / 20);
  EXPECT_FLOAT_EQ(lin.at(110), 0.1f);
  EXPECT_FLOAT_EQ(lin.at(1000), 0.1f);
  const LRSchedule sq = wsd(LRDecay::kSqrt);  // 1 - sqrt(progress): fast at first
  EXPECT_EQ(sq.at(90), 1.0f);
  EXPECT_FLOAT_EQ(sq.at(95), 0.55f);  // progress 1/4, sqrt 1/2
  EXPECT_FLOAT_EQ(sq.at(110), 0.1f);
  const LRSchedule cos = wsd(LRDecay::kCosine);
  EXPECT_EQ(cos.at(89), 1.0f);
  EXPECT_FLOAT_EQ(cos.at(100), 0.55f);
  EXPECT_FLOAT_EQ(cos.at(95), float(0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  const LRSchedule flat = wsd(LRDecay::kConstant);  // no decay: min_lr is never reached
  EXPECT_FLOAT_EQ(flat.at(0), 0.1f);
  for (int step : {9, 90, 109, 110, 500}) EXPECT_EQ(flat.at(step), 1.0f) << step;
}

// The decay spans round(ratio x steps after the warm-up), at least one step
// and at most all of them.
TEST(Schedule, DecayLengthRoundsAndIsAtLeastOneStep) {
  EXPECT_EQ((LRSchedule{1, 0, 0, 10, LRDecay::kLinear, 0.25}.decay_start()), 7);  // 2.5 rounds to 3
  EXPECT_EQ((LRSchedule{1, 0, 0, 10, LRDecay::kLinear, 1e-6}.decay_start()), 9);
  EXPECT_EQ((LRSchedule{1, 0, 4, 10, LRDecay::kLinear, 1.0}.decay_start()), 4);
  EXPECT_EQ((LRSchedule{1, 0, 20, 10, LRDecay::kLinear, 0.5}.decay_start()), 20);  // all warm-up
  const LRSchedule one{1, 0, 0, 10, LRDecay::kLinear, 1e-6};
  EXPECT_EQ(one.at(8), 1.0f);
  EXPECT_EQ(one.at(9), 1.0f);  // the last step is the decay's first: progress 0
  EXPECT_EQ(one.at(10), 0.0f);
}

// A fixed decay length keeps the cool-down's length when the run grows (a
// ratio grows it with the run), overrides the ratio, and equals the ratio that
// gives the same length.
TEST(Schedule, FixedDecayStepsKeepTheCoolDownWhenARunIsExtended) {
  const LRSchedule short_run{1, 0.1f, 4, 20, LRDecay::kLinear, 1.0, 4};
  const LRSchedule long_run{1, 0.1f, 4, 40, LRDecay::kLinear, 1.0, 4};
  EXPECT_EQ(short_run.decay_start(), 16);
  EXPECT_EQ(long_run.decay_start(), 36);
  const LRSchedule same_by_ratio{1, 0.1f, 4, 20, LRDecay::kLinear, 0.25};
  for (int step = 0; step < 22; ++step) EXPECT_EQ(short_run.at(step), same_by_ratio.at(step)) << step;
  for (int step = 0; step < 36; ++step) EXPECT_EQ(long_run.at(step), step < 4 ? short_run.at(step) : 1.0f) << step;
  EXPECT_EQ(long_run.at(36 + 2), short_run.at(16 + 2));  // the same cool-down, shifted
  EXPECT_EQ(long_run.at(40), 0.1f);
  EXPECT_EQ((LRSchedule{1, 0, 4, 20, LRDecay::kLinear, 0.5, 100}.decay_start()), 4);  // at most all steps after warm-up
}

// The LR of logged step k is at(k - 1): the stable phase runs through the
// decay's first step (progress 0), the decay's LRs below lr come after it.
TEST(Schedule, DescribesItselfInLoggedStepNumbers) {
  const LRSchedule wsd{0.003f, 0.0003f, 4, 20, LRDecay::kLinear, 0.25};
  EXPECT_EQ(wsd.describe(), "warm-up over steps 1-4, 0.003 through step 17, then linear decay over steps 18-20 towards 0.0003");
  EXPECT_EQ(wsd.at(17 - 1), 0.003f);
  EXPECT_LT(wsd.at(18 - 1), 0.003f);
  EXPECT_EQ((LRSchedule{0.003f, 0.0003f, 0, 20}.describe()),
            "0.003 through step 1, then cosine decay over steps 2-20 towards 0.0003");
  EXPECT_EQ((LRSchedule{0.003f, 0.0003f, 5, 20}.describe()),
            "warm-up over steps 1-5, 0.003 through step 6, then cosine decay over steps 7-20 towards 0.0003");
  EXPECT_EQ((LRSchedule{0.003f, 0.0003f, 5, 20, LRDecay::kConstant}.describe()),
            "warm-up over steps 1-5, 0.003 constant");
  EXPECT_EQ((LRSchedule{0.003f, 0.0003f, 0, 20, LRDecay::kLinear, 0.01}.describe()), "0.003 through step 20");
  // A warm-up as long as the run, or longer: the run never reaches lr.
  EXPECT_EQ((LRSchedule{0.003f, 0.0003f, 30, 20}.describe()),
            "warm-up over steps 1-30; the run ends in it, at step 20 with 0.002 of 0.003");
  EXPECT_EQ((LRSchedule{0.003f, 0.0003f, 20, 20, LRDecay::kConstant}.describe()),
            "warm-up over steps 1-20; the run ends in it, at step 20 with 0.003 of 0.003");
  // Spans of one step say so.
  EXPECT_EQ((LRSchedule{0.003f, 0.0003f, 1, 3}.describe()),
            "warm-up over step 1, 0.003 through step 2, then cosine decay over step 3 towards 0.0003");
}

TEST(Schedule, DecayNamesParseAndUnknownOnesAreErrors) {
  for (LRDecay d : {LRDecay::kCosine, LRDecay::kLinear, LRDecay::kSqrt, LRDecay::kConstant})
    EXPECT_EQ(parse_lr_decay(to_string(d)), d);
  try {
    parse_lr_decay("exponential");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "invalid lr-decay = 'exponential': expected cosine, linear, sqrt or constant");
  }
}

TEST(AdamW, MatchesTheClosedFormFirstStep) {
  // After one step from m = v = 0, the bias-corrected update is lr * sign(g)
  // (up to eps), plus decoupled decay on 2-D weights only.
  ParamLayout L(GPTConfig{1, 1, 4, 4, 8});
  const UnitSpec& u = L.unit(1);
  std::vector<float> p(u.numel, 1.f), g(u.numel), m(u.numel), v(u.numel);
  for (int64_t i = 0; i < u.numel; ++i) g[i] = (i % 2 ? 1.f : -1.f) * (0.5f + i);
  AdamWHyper h{0.9f, 0.95f, 1e-8f, 0.1f};
  adamw_update(u, 0, u.numel, p.data(), g.data(), m.data(), v.data(), h, {0.01f, 1, 1.f});
  for (const TensorSpec& t : u.tensors) {
    for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
      const float expect = (t.decay ? 1.f - 0.01f * 0.1f : 1.f) - 0.01f * (g[i] > 0 ? 1.f : -1.f);
      ASSERT_NEAR(p[i], expect, 1e-6) << t.name;
    }
  }
}

TEST(Clip, ScaleOnlyAboveTheThreshold) {
  EXPECT_EQ(clip_scale(0.5, 1.f), 1.f);
  EXPECT_NEAR(clip_scale(4.0, 1.f), 0.25f, 1e-6);
  EXPECT_EQ(clip_scale(4.0, 0.f), 1.f);  // off
  std::vector<float> g(100000, 0.5f);
  EXPECT_DOUBLE_EQ(sum_squares(g.data(), int64_t(g.size())), 25000.0);
}

TEST(Flops, PalmFormulaForGpt2Small) {
  GPTConfig c = preset("gpt2-124m");
  // 12 * 12 * 768^2 + 50257 * 768 = 123,532,032 matmul weights.
  EXPECT_EQ(matmul_params(c), 123532032);
  EXPECT_DOUBLE_EQ(train_flops_per_token(c, 1024), 6.0 * 123532032 + 12.0 * 12 * 768 * 1024);
  // Split as bench_gpu_train's phases report it.
  const StepFlops f = step_flops_per_token(c, 1024);
  EXPECT_DOUBLE_EQ(f.blocks_forward, 2.0 * 12 * 12 * 768 * 768 + 4.0 * 12 * 768 * 1024);
  EXPECT_DOUBLE_EQ(f.head, 6.0 * 50257 * 768);
  EXPECT_DOUBLE_EQ(f.blocks_backward, 2 * f.blocks_forward);
}

// The names CUDA reports (cudaDeviceProp::name) and the short ones `plan
// --gpu` takes find the same row; a more specific name is not taken for a
// less specific one's.
TEST(GpuTable, PeakAndMemoryByDeviceName) {
  constexpr int64_t GiB = int64_t(1) << 30;
  EXPECT_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", true), 989e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", false), 67e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA H100 80GB HBM3"), 80 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H100 PCIe", true), 756e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA H100 NVL"), 94 * GiB);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA H200"), 141 * GiB);
  EXPECT_EQ(gpu_memory_bytes("H200"), 141 * GiB);
  // Any case, as a user types `plan --gpu`: the same rows, the more specific name still first.
  EXPECT_EQ(gpu_peak_flops("h100", true), 989e12);
  EXPECT_EQ(gpu_peak_flops("h100 pcie", true), 756e12);
  EXPECT_EQ(gpu_peak_flops("gh200", true), 989e12);
  EXPECT_EQ(gpu_memory_bytes("a100 40gb"), 40 * GiB);
  EXPECT_EQ(gpu_peak_flops("l40s", true), 362e12);
  EXPECT_EQ(gpu_peak_flops("nvidia geforce rtx 4090 laptop gpu", true), 0);
  EXPECT_EQ(gpu_peak_flops("rtx 3090 ti", true), 80e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA GH200 480GB"), 96 * GiB);  // 480 GB is the Grace CPU's memory
  EXPECT_EQ(gpu_memory_bytes("NVIDIA GH200 144G HBM3e"), 144 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GH200 480GB", true), 989e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA B200", true), 2250e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA B200"), 180 * GiB);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA A100-SXM4-40GB"), 40 * GiB);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA A100-SXM4-80GB"), 80 * GiB);
  EXPECT_EQ(gpu_memory_bytes("A100"), 80 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA A100-SXM4-40GB", true), 312e12);
  EXPECT_EQ(gpu_memory_bytes("Tesla V100-SXM2-16GB"), 16 * GiB);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA L40S"), 48 * GiB);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA A10"), 24 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA L40S", true), 362e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA L40", true), 181e12);  // not the L4's
  EXPECT_EQ(gpu_peak_flops("NVIDIA L4", true), 121e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA L4"), 24 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H200 NVL", true), 835e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA H200 NVL"), 141 * GiB);
  EXPECT_EQ(gpu_peak_flops("emulated CUDA device", true), 0);
  EXPECT_EQ(gpu_memory_bytes("emulated CUDA device"), 0);
  // Keys match whole words: another model whose name holds one is not it.
  EXPECT_EQ(gpu_peak_flops("NVIDIA GB200", true), 2250e12);  // B200's figures, its own row
  EXPECT_EQ(gpu_peak_flops("NVIDIA B300 SXM6 AC", true), 2250e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA B300 SXM6 AC", false), 75e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA B300 SXM6 AC"), 268 * GiB);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA GB300"), 268 * GiB);  // its own row, not the B300's words
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA B300 SXM6 AC"), 720e9);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA B300 SXM6 AC", true, 74), 2250e12 / 2);  // a MIG slice of half of 148
  EXPECT_EQ(gpu_peak_flops("NVIDIA RTX A1000", true), 0);   // neither an A100 nor an A10
  EXPECT_EQ(gpu_peak_flops("NVIDIA A10G", true), 0);        // AWS's A10G is not an A10
  EXPECT_EQ(gpu_peak_flops("NVIDIA RTX A4000", true), 0);   // not an A40
  EXPECT_EQ(gpu_peak_flops("Quadro RTX 6000", true), 0);    // Turing, not the Ada card
  EXPECT_EQ(gpu_peak_flops("NVIDIA A40", true), 149.7e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA RTX A6000", true), 154.8e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA RTX 6000 Ada Generation", true), 364.2e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 4090", true), 165.2e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 4090", false), 82.6e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA GeForce RTX 5090"), 32 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 5090", true), 209.5e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 3090", true), 71e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 3090 Ti", true), 80e12);  // its own row, not the 3090's
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 3090 Ti", false), 40e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA GeForce RTX 3090"), 24 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H20", true), 148e12);  // China's Hopper: neither an H200 nor an H100
  EXPECT_EQ(gpu_peak_flops("NVIDIA H20", false), 44e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA H20"), 96 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H200", true), 989e12);  // not the H20
  EXPECT_EQ(gpu_peak_flops("NVIDIA L20", true), 119.5e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA L20"), 48 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", true), 500e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA RTX PRO 6000 Blackwell Server Edition", false), 125e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA RTX PRO 6000 Blackwell Server Edition"), 96 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", true), 0);  // 300 W
  EXPECT_EQ(gpu_peak_flops("NVIDIA H800", true), 989e12);  // China's H100s and A100s compute as those
  EXPECT_EQ(gpu_peak_flops("NVIDIA H800 PCIe", true), 756e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA H800"), 80 * GiB);
  EXPECT_EQ(gpu_peak_flops("NVIDIA A800-SXM4-80GB", true), 312e12);
  EXPECT_EQ(gpu_memory_bytes("NVIDIA A800-SXM4-40GB"), 40 * GiB);
  // A laptop part is clocked lower than its desktop namesake: unknown.
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 4090 Laptop GPU", true), 0);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 5090 Max-Q", true), 0);
}

// A MIG instance's peak is its share of its GPU's multiprocessors; a count
// not below the product's (or none) is the whole GPU.
TEST(GpuTable, PeakScalesWithTheMultiprocessors) {
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", true, 66), 989e12 / 2);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", false, 33), 67e12 / 4);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", true, 132), 989e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", true, 0), 989e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", true, 264), 989e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H100 PCIe", true, 57), 756e12 / 2);  // 114 SMs
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA A100-SXM4-40GB", true, 54), 312e12 / 2);  // 108 SMs
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA B200", true, 74), 2250e12 / 2);  // 148 SMs
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H20", true, 39), 148e12 / 2);  // 78 SMs
  EXPECT_EQ(gpu_peak_flops("emulated CUDA device", true, 66), 0);
}

// A ring inside a node runs at 80% of a GPU's link per direction: NVLink's,
// or PCIe's for PCIe cards and for an NVLink GPU's PCIe form.
TEST(GpuTable, RingBandwidthByDeviceName) {
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA H100 80GB HBM3"), 360e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("H200"), 360e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA GH200 480GB"), 360e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA B200"), 720e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA A100-SXM4-40GB"), 240e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("Tesla V100-SXM2-16GB"), 120e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA H100 PCIe"), 51.2e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA GB200"), 720e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA GeForce RTX 5090"), 51.2e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA RTX 6000 Ada Generation"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA H100 NVL"), 51.2e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA H200 NVL"), 51.2e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA A100 80GB PCIe"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA A100-PCIE-40GB"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA L40S"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA A10"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA L4"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("Tesla V100-PCIE-32GB"), 12.8e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA H20"), 360e9);  // NVLink as the H100's
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA L20"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA GeForce RTX 3090"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA RTX PRO 6000 Blackwell Server Edition"), 51.2e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA H800"), 160e9);  // NVLink at 200 GB/s a direction
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA A800-SXM4-80GB"), 160e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA A800 80GB PCIe"), 25.6e9);
  EXPECT_DOUBLE_EQ(gpu_ring_bandwidth("NVIDIA H800 PCIe"), 51.2e9);
  EXPECT_EQ(gpu_ring_bandwidth("emulated CUDA device"), 0);
}

}  // namespace
}  // namespace gpt
