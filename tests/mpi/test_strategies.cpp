// Every strategy against single-rank training on the same global batch:
// losses, gradient norms and final parameters after 10 optimizer steps, with
// clipping active, with gradient accumulation and with activation
// checkpointing. Launched on 2 and 4 ranks by ctest. (Memory and
// communication against the formulas: test_plan.cpp.)
//
// Tolerance 1e-5 relative: the strategies sum the same gradients in a
// different order (per-rank partial sums, then the collective), which
// changes fp32 results in the last bits; 10 AdamW steps amplify that to
// ~1e-6. A wrong reduction (missing a rank, double-counting a replica, a
// misplaced shard) is off by O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "io/token_shard.hpp"
#include "model/gpt.hpp"
#include "model/layout.hpp"
#include "fixtures.hpp"
#include "mpi_test_env.hpp"
#include "strategies/trainer.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

struct Result {
  TrainSummary sum;
  std::vector<std::vector<float>> params;
};

class Strategies : public ::testing::Test {
 protected:
  static RunConfig base_config() { return test::small_run(); }
  static Result train(const RunConfig& c, MPI_Comm comm) {
    Trainer t(c, comm);
    Result r;
    r.sum = t.run();
    r.params = t.full_params();
    return r;
  }
  // The single-rank reference, computed once per configuration key on every rank.
  static const Result& reference(bool ckpt = false) {
    static std::map<bool, Result> cache;
    auto it = cache.find(ckpt);
    if (it == cache.end()) {
      RunConfig c = base_config();
      c.micro_batch = 8;
      c.activation_checkpointing = ckpt;
      it = cache.emplace(ckpt, train(c, MPI_COMM_SELF)).first;
    }
    return it->second;
  }
  static void expect_equivalent(const Result& got, const Result& want, const std::string& what) {
    ASSERT_EQ(got.sum.losses.size(), want.sum.losses.size());
    for (size_t s = 0; s < want.sum.losses.size(); ++s) {
      EXPECT_NEAR(got.sum.losses[s], want.sum.losses[s], 1e-5 * want.sum.losses[s]) << what << " step " << s + 1;
      EXPECT_NEAR(got.sum.grad_norms[s], want.sum.grad_norms[s], 1e-5 * want.sum.grad_norms[s])
          << what << " grad norm, step " << s + 1;
      EXPECT_GT(want.sum.grad_norms[s], 0.5) << "clipping should be active";
    }
    for (size_t u = 0; u < want.params.size(); ++u) {
      float scale = 0, worst = 0;
      for (size_t i = 0; i < want.params[u].size(); ++i) {
        scale = std::max(scale, std::abs(want.params[u][i]));
        worst = std::max(worst, std::abs(got.params[u][i] - want.params[u][i]));
      }
      EXPECT_LE(worst, 1e-5 * scale) << what << ": unit " << u;
    }
  }
};

struct Case {
  std::string strategy, mesh, inner;
  int micro;  // 0: global / world (no accumulation)
  bool ckpt;
  Recompute recompute = Recompute::kNone;  // the same gradients bit for bit: the same reference
};

std::vector<Case> cases() {
  const int W = test::env().size();
  std::vector<Case> c;
  for (std::string s : {"ddp", "zero1", "zero2", "zero3"}) {
    c.push_back({s, "", "zero3", 0, false});
    c.push_back({s, "", "zero3", 1, false});  // accumulation of 8 / W micro-batches
  }
  c.push_back({"zero3", "", "zero3", 0, true});
  c.push_back({"ddp", "", "zero3", 0, true});
  c.push_back({"zero3", "", "zero3", 1, false, Recompute::kGeluLn});
  c.push_back({"ddp", "", "zero3", 0, false, Recompute::kGelu});
  if (W == 4) {
    for (std::string m : {"2x2", "1x4", "4x1"}) c.push_back({"hybrid", m, "zero3", 0, false});
    c.push_back({"hybrid", "2x2", "zero2", 0, false});
    c.push_back({"hybrid", "2x2", "zero3", 1, false});
  } else if (W == 2) {
    for (std::string m : {"2x1", "1x2"}) c.push_back({"hybrid", m, "zero3", 0, false});
    c.push_back({"hybrid", "1x2", "zero2", 1, false});
  }
  return c;
}

TEST_F(Strategies, EveryStrategyEqualsSingleRankTraining) {
  for (const Case& k : cases()) {
    RunConfig c = base_config();
    c.strategy = k.strategy;
    c.mesh = k.mesh;
    c.hybrid_inner = k.inner;
    if (k.micro) c.micro_batch = k.micro;
    c.activation_checkpointing = k.ckpt;
    c.recompute = k.recompute;
    const std::string what = fmt::format("{} mesh '{}' inner {} micro {} ckpt {} recompute {}", k.strategy, k.mesh,
                                         k.inner, c.micro_batch, k.ckpt, to_string(k.recompute));
    SCOPED_TRACE(what);
    expect_equivalent(train(c, MPI_COMM_WORLD), reference(k.ckpt), what);
  }
}

TEST_F(Strategies, SameRunTwiceIsBitIdentical) {
  RunConfig c = base_config();
  c.strategy = "zero3";
  c.steps = 4;
  const Result a = train(c, MPI_COMM_WORLD), b = train(c, MPI_COMM_WORLD);
  EXPECT_EQ(a.sum.losses, b.sum.losses);
  EXPECT_EQ(a.params, b.params);
}

// A HellaSwag-format file of random byte strings: contexts of 5 to 70 bytes
// (some rows exceed seq_len 64, so contexts are cut), 2 to 5 endings of 1 to
// 12 bytes, 203 examples (not a multiple of any world size: some ranks make
// empty passes). Written by rank 0.
std::string choice_file() {
  const std::string path = (fs::temp_directory_path() / "gpt_mpi_test_hellaswag.jsonl").string();
  if (test::env().rank() == 0) {
    std::mt19937 rng(7);
    auto text = [&](int lo, int hi) {
      std::string s(size_t(std::uniform_int_distribution<int>(lo, hi)(rng)), ' ');
      for (char& c : s) c = char(std::uniform_int_distribution<int>('a', 'z')(rng));
      return s;
    };
    std::ofstream out(path);
    for (int e = 0; e < 203; ++e) {
      nlohmann::json j = {{"ctx", text(5, 70)}, {"endings", nlohmann::json::array()}};
      const int k = std::uniform_int_distribution<int>(2, 5)(rng);
      for (int i = 0; i < k; ++i) j["endings"].push_back(text(1, 12));
      j["label"] = std::uniform_int_distribution<int>(0, k - 1)(rng);
      out << j.dump() << "\n";
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

// The trainer's HellaSwag (ranks splitting the examples, endings packed B
// to a pass, padded, sharded parameters gathered) against the model run on
// one sequence at a time, scored here from its own reading of the rule:
// every target from the ending's first token on, the last seq_len pairs of
// context ++ " " ++ ending. Both accuracies must match exactly: an
// off-by-one position, a lost rank or a misplaced row changes scores.
TEST_F(Strategies, HellaSwagEqualsOneSequenceAtATime) {
  const std::string file = choice_file();
  for (const Case& k : {Case{"zero3", "", "zero3", 0, false}, Case{"ddp", "", "zero3", 1, false}}) {
    RunConfig c = base_config();
    c.steps = 3;
    c.gpt.seq_len = c.seq_len = 64;  // passes of 32 and 64 positions
    c.strategy = k.strategy;
    if (k.micro) c.micro_batch = k.micro;
    c.hellaswag = file;
    SCOPED_TRACE(fmt::format("{} micro {}", k.strategy, c.micro_batch));
    const Result got = train(c, MPI_COMM_WORLD);

    const ParamLayout layout(c.gpt);
    GPT<float> m(layout, {1, c.seq_len}, nullptr);
    std::vector<const float*> p;
    for (const auto& u : got.params) p.push_back(u.data());
    std::ifstream in(file);
    int right = 0, right_norm = 0, n = 0, rules_differ = 0;
    double closest = 1e9;  // the smallest gap between the best two endings
    for (std::string line; std::getline(in, line); ++n) {
      const nlohmann::json j = nlohmann::json::parse(line);
      const std::string ctx = j["ctx"];
      std::vector<double> sums, means;
      for (const std::string e : j["endings"]) {
        const std::string s = ctx + " " + e;
        const size_t start = s.size() - 1 > size_t(c.seq_len) ? s.size() - 1 - size_t(c.seq_len) : 0;
        std::vector<int32_t> tok, tgt;
        for (size_t i = start; i + 1 < s.size(); ++i) {
          tok.push_back(uint8_t(s[i]));
          tgt.push_back(uint8_t(s[i + 1]));
        }
        m.set_shape(1, int(tok.size()));
        forward_backward<float>(m, p, {}, tok.data(), tgt.data(), 0.f);
        double sum = 0;
        int count = 0;
        for (size_t i = 0; i < tok.size(); ++i)
          if (start + i + 1 >= ctx.size()) {  // the target is one of " " + e
            sum += m.row_losses()[i];
            ++count;
          }
        ASSERT_EQ(count, int(std::min(e.size() + 1, tok.size())));
        sums.push_back(sum);
        means.push_back(sum / count);
      }
      auto best = [&](const std::vector<double>& v) {
        std::vector<double> sorted = v;
        std::sort(sorted.begin(), sorted.end());
        closest = std::min(closest, sorted[1] - sorted[0]);
        return int(std::min_element(v.begin(), v.end()) - v.begin());
      };
      right += best(sums) == j["label"].get<int>();
      right_norm += best(means) == j["label"].get<int>();
      rules_differ += best(sums) != best(means);
    }
    ASSERT_EQ(n, 203);
    EXPECT_GT(closest, 1e-4) << "a near tie: rounding could decide it";
    EXPECT_DOUBLE_EQ(got.sum.final_hellaswag_acc, double(right) / n);
    EXPECT_DOUBLE_EQ(got.sum.final_hellaswag_acc_norm, double(right_norm) / n);
    EXPECT_GT(rules_differ, 0) << "the two rules should choose differently somewhere here";
  }
}

}  // namespace
}  // namespace gpt
