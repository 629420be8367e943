#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/closest_name.hpp"
#include "core/error.hpp"
#include "io/run_config.hpp"
#include "model/attention_ds.hpp"

namespace gpt {
namespace {

RunConfig parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gpt_train");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  RunConfig c;
  parse_run_config(static_cast<int>(argv.size()), argv.data(), c);
  return c;
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RunConfig, PresetsAndOverrides) {
  auto c = parse({"--data", "x", "--model", "gpt2-124m", "--n-layer", "2", "--seq-len", "256"});
  EXPECT_EQ(c.gpt.n_layer, 2);
  EXPECT_EQ(c.gpt.n_embd, 768);
  EXPECT_EQ(c.seq_len, 256);
  auto d = parse({"--data", "x"});
  EXPECT_EQ(d.gpt, preset("tiny"));
  EXPECT_EQ(d.seq_len, preset("tiny").seq_len);
  // Logs name an overridden preset as resized; a shorter training T is not a new shape.
  EXPECT_EQ(model_name(c.model, c.gpt), "gpt2-124m (resized)");
  EXPECT_EQ(model_name(d.model, d.gpt), "tiny");
  const auto e = parse({"--data", "x", "--model", "gpt2-124m", "--seq-len", "256"});
  EXPECT_EQ(model_name(e.model, e.gpt), "gpt2-124m");
}

TEST(RunConfig, TomlThenCommandLineOverrides) {
  const auto p = std::filesystem::temp_directory_path() / "gpt_cfg_test.toml";
  {
    std::ofstream f(p);
    f << "model = \"tiny\"\nlr = 0.01\nglobal_batch = 32\nmicro-batch = 4\nactivation_checkpointing = true\n"
         "recompute = \"gelu-ln\"\ndata = \"a.bin\"\n";
  }
  auto c = parse({"--config", p.string(), "--lr", "0.002"});
  EXPECT_FLOAT_EQ(c.lr, 0.002f);
  EXPECT_EQ(c.global_batch, 32);
  EXPECT_EQ(c.micro_batch, 4);
  EXPECT_TRUE(c.activation_checkpointing);
  EXPECT_EQ(c.recompute, Recompute::kGeluLn);
  EXPECT_EQ(parse({"--data", "x", "--recompute", "gelu"}).recompute, Recompute::kGelu);
  EXPECT_EQ(c.data, "a.bin");
  {
    std::ofstream f(p);
    f << "learning_rate = 0.01\n";
  }
  EXPECT_EQ(error_of({"--config", p.string()}), p.string() + ": unknown key 'learning_rate'");
  std::filesystem::remove(p);
}

// A mistyped key or flag is named with the one it likely meant, in the file's spelling; an argument no flag took
// is named first (not CLI11's reversed list); a file's bad value names the file.
TEST(RunConfig, UnknownNamesSuggestTheNearestAndFileValuesNameTheFile) {
  const auto p = std::filesystem::temp_directory_path() / "gpt_cfg_typo.toml";
  auto with = [&](const std::string& text) {
    std::ofstream(p) << text;
    return error_of({"--config", p.string()});
  };
  EXPECT_EQ(with("stratgy = \"zero3\"\n"), p.string() + ": unknown key 'stratgy' (did you mean 'strategy'?)");
  EXPECT_EQ(with("micro_bach = 2\n"), p.string() + ": unknown key 'micro_bach' (did you mean 'micro_batch'?)");
  EXPECT_EQ(with("strategy = \"zero4\"\n"),
            p.string() + ": invalid strategy = 'zero4': expected ddp, zero1, zero2, zero3, hybrid, auto");
  std::filesystem::remove(p);
  EXPECT_EQ(error_of({"--data", "x", "--stategy", "zero3"}),
            "command line: unknown flag --stategy (did you mean --strategy?)");
  EXPECT_EQ(error_of({"--data", "x", "--stategy=zero3"}),
            "command line: unknown flag --stategy (did you mean --strategy?)");
  EXPECT_EQ(error_of({"--data", "x", "--warmpu", "10", "--steps", "abc"}),  // the typo first: it may be the cause
            "command line: unknown flag --warmpu (did you mean --warmup?)");
  EXPECT_EQ(error_of({"--data", "x", "--frobnicate"}), "command line: unknown flag --frobnicate");
  EXPECT_EQ(error_of({"--data", "x", "zero3"}), "command line: unexpected argument 'zero3'");
  EXPECT_EQ(error_of({"--data", "x", "--strategy", "zero3"}), "");
}

// A flag given twice takes its last value (a job script's or the sweep's own
// flags come first, the user's after them), each such flag named in one
// line for the log; a switch given twice means the same and is not named.
TEST(RunConfig, RepeatedFlagTakesItsLastValue) {
  const auto p = std::filesystem::temp_directory_path() / "gpt_cfg_repeat_a.toml";
  const auto q = std::filesystem::temp_directory_path() / "gpt_cfg_repeat_b.toml";
  std::ofstream(p) << "lr = 0.01\n";
  std::ofstream(q) << "lr = 0.02\n";
  const RunConfig c =
      parse({"--data", "x", "--config", p.string(), "--steps", "1000", "--val-data", "", "--activation-checkpointing",
             "--steps", "50", "--val-data", "v.bin", "--activation-checkpointing", "--config", q.string()});
  EXPECT_EQ(c.steps, 50);
  EXPECT_EQ(c.val_data, "v.bin");
  EXPECT_FLOAT_EQ(c.lr, 0.02f);  // the second file, not both
  EXPECT_TRUE(c.activation_checkpointing);
  ASSERT_EQ(c.repeated_flags.size(), 3u);
  EXPECT_EQ(c.repeated_flags[0],
            fmt::format("command line: --config given 2 times ({}, {}): the last is used", p.string(), q.string()));
  EXPECT_EQ(c.repeated_flags[1], "command line: --val-data given 2 times ('', v.bin): the last is used");
  EXPECT_EQ(c.repeated_flags[2], "command line: --steps given 2 times (1000, 50): the last is used");
  EXPECT_TRUE(parse({"--data", "x", "--steps", "5"}).repeated_flags.empty());
  // The value used is checked as one given once is.
  EXPECT_EQ(error_of({"--data", "x", "--steps", "5", "--steps", "-1"}), "invalid steps = -1: must be >= 0");
  std::filesystem::remove(p);
  std::filesystem::remove(q);
}

// A micro-batch not given is the largest count up to 8 that divides a
// rank's share of the global batch; one given (flag or file) is kept, and
// so is an evaluation's.
TEST(RunConfig, MicroBatchNotGivenFitsTheWorld) {
  const auto fitted = [](std::vector<std::string> args, int world) {
    args.insert(args.begin(), {"--data", "x"});
    RunConfig c = parse(args);
    const std::string line = fit_micro_batch(c, world);
    return std::pair{c.micro_batch, line};
  };
  EXPECT_EQ(fitted({}, 1), std::pair(8, std::string()));  // the default as it was
  EXPECT_EQ(fitted({"--global-batch", "64"}, 2).first, 8);
  EXPECT_EQ(fitted({"--global-batch", "24"}, 2).first, 6);  // 12 a rank
  EXPECT_EQ(fitted({"--global-batch", "22"}, 2).first, 1);  // 11 a rank: accumulation of 11
  EXPECT_EQ(fitted({"--global-batch", "4"}, 1).first, 4);   // was an error: 4 is not a multiple of 8
  EXPECT_EQ(fitted({"--global-batch", "16"}, 16).first, 1);
  const auto [m, line] = fitted({}, 4);
  EXPECT_EQ(m, 2);
  EXPECT_EQ(line,
            "micro-batch 2: not given, so the largest count up to 8 that divides a rank's 2 sequences a step "
            "(global-batch 8 / 4 ranks); --micro-batch sets it");
  // Given, on the command line or in a file, it is what it says (and the loader checks it against the ranks).
  EXPECT_EQ(fitted({"--micro-batch", "8", "--global-batch", "16"}, 2), std::pair(8, std::string()));
  const auto p = std::filesystem::temp_directory_path() / "gpt_cfg_micro.toml";
  std::ofstream(p) << "micro-batch = 8\nglobal-batch = 16\n";
  EXPECT_EQ(fitted({"--config", p.string()}, 2).first, 8);
  std::filesystem::remove(p);
  EXPECT_EQ(fitted({"--steps", "0"}, 4).first, 8);  // an evaluation's batches are micro-batches alone
  // A global batch the ranks do not divide names both, and the multiples either side of it; one not given is
  // named as the default, with the flag that sets it.
  auto fit_error = [](RunConfig c, int world) {
    try {
      fit_micro_batch(c, world, "run.toml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(fit_error(parse({"--data", "x"}), 3),
            "invalid global-batch = 8 (the default): must be a multiple of the 3 data-parallel ranks (each takes "
            "global-batch / ranks sequences a step): 6 or 9 would do (--global-batch N)");
  EXPECT_EQ(fit_error(parse({"--data", "x", "--global-batch", "3"}), 4),
            "invalid global-batch = 3 in run.toml: must be a multiple of the 4 data-parallel ranks (each takes "
            "global-batch / ranks sequences a step): 4 would do");
  EXPECT_EQ(fit_error(parse({"--data", "x", "--global-batch", "22"}), 8),
            "invalid global-batch = 22 in run.toml: must be a multiple of the 8 data-parallel ranks (each takes "
            "global-batch / ranks sequences a step): 16 or 24 would do");
  // A global batch below 8 no longer fails at parse time when the micro-batch was not given.
  EXPECT_EQ(error_of({"--data", "x", "--global-batch", "4"}), "");
  EXPECT_EQ(error_of({"--data", "x", "--global-batch", "4", "--micro-batch", "8"}),
            "invalid global-batch = 4: must be a multiple of micro-batch = 8");
}

TEST(RunConfig, TimeLimitTakesSlurmsTimeForms) {
  const auto limit = [](const std::string& v) { return parse({"--data", "x", "--time-limit", v}).time_limit_s; };
  EXPECT_EQ(parse({"--data", "x"}).time_limit_s, 0);  // no limit by default
  EXPECT_EQ(limit("0"), 0);
  EXPECT_EQ(limit("90"), 90 * 60);                       // minutes
  EXPECT_EQ(limit("1:30"), 90);                          // MM:SS
  EXPECT_EQ(limit("02:00:05"), 2 * 3600 + 5);            // HH:MM:SS
  EXPECT_EQ(limit("2-0"), 2 * 86400);                    // D-HH
  EXPECT_EQ(limit("1-2:3"), 86400 + 2 * 3600 + 3 * 60);  // D-HH:MM
  EXPECT_EQ(limit("1-2:3:4"), 86400 + 2 * 3600 + 3 * 60 + 4);
  const std::string forms =
      "expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (the forms of SLURM's --time)";
  for (const char* bad :
       {"", "1:2:3:4", "1-2:3:4:5", "-5", "5-", "1:", ":30", "1.5", "1h", "1 2", "1--2", "1234567890"})
    EXPECT_EQ(error_of({"--data", "x", "--time-limit", bad}), fmt::format("invalid time-limit = '{}': {}", bad, forms))
        << bad;
}

TEST(RunConfig, InvalidValuesNameTheKeyAndValue) {
  EXPECT_EQ(error_of({"--data", "x", "--lr", "-1"}), "invalid lr = -1: must be in [0, 10]");
  EXPECT_EQ(error_of({"--data", "x", "--seq-len", "4096"}),
            "invalid seq-len = 4096: larger than the model's context n-ctx = 128");
  EXPECT_EQ(error_of({"--data", "x", "--global-batch", "10", "--micro-batch", "4"}),
            "invalid global-batch = 10: must be a multiple of micro-batch = 4");
  EXPECT_EQ(error_of({"--data", "x", "--steps", "ten"}), "invalid steps = 'ten': expected an integer");
  EXPECT_NE(error_of({"--data", "x", "--model", "gpt5"}).find("invalid model = 'gpt5'"), std::string::npos);
  EXPECT_NE(error_of({"--data", "x", "--n-head", "3"}).find("invalid n_embd = 128: must be a multiple of n_head"),
            std::string::npos);
  EXPECT_NE(error_of({"--data", "x", "--bogus", "1"}).find("command line"), std::string::npos);
  EXPECT_EQ(error_of({}), "missing data: give --data GLOB (llm.c token shards), or --steps 0 to evaluate only");
  // --steps 0 evaluates only, so it needs no training data; fewer steps are refused.
  EXPECT_EQ(error_of({"--steps", "0"}), "");
  EXPECT_EQ(parse({"--steps", "0", "--val-data", "v"}).steps, 0);
  EXPECT_EQ(error_of({"--steps", "-1"}), "invalid steps = -1: must be >= 0");
  EXPECT_EQ(error_of({"--steps", "1"}),
            "missing data: give --data GLOB (llm.c token shards), or --steps 0 to evaluate only");
  EXPECT_EQ(error_of({"--data", "x", "--lr", "1e-3", "--min-lr", "2e-3"}),
            "invalid min-lr = 0.002: larger than lr = 0.001");
  EXPECT_EQ(error_of({"--data", "x", "--device", "cuda", "--gemm-autotune", "65"}),
            "invalid gemm-autotune = 65: must be in [0, 64]");
  EXPECT_EQ(error_of({"--data", "x", "--gemm-autotune", "4"}),
            "invalid gemm-autotune = 4: needs --device cuda (cuBLASLt's algorithms)");
  EXPECT_EQ(parse({"--data", "x", "--device", "cuda", "--gemm-autotune", "8"}).gemm_autotune, 8);
  EXPECT_EQ(error_of({"--data", "x", "--attention-ds-mib", "64"}),
            "invalid attention-ds-mib = 64: needs --device cuda (the tensor-core attention)");
  EXPECT_EQ(error_of({"--data", "x", "--device", "cuda", "--attention-ds-mib", "-1"}),
            "invalid attention-ds-mib = -1: must be in [0, 1048576]");
  EXPECT_EQ(parse({"--data", "x", "--device", "cuda"}).attention_ds_mib, 0);  // the default on cuda: recompute
  EXPECT_EQ(parse({"--data", "x"}).attention_ds_mib, 0);                         // nothing on the CPU
  EXPECT_EQ(parse({"--data", "x", "--device", "cuda", "--attention-ds-mib", "0"}).attention_ds_mib, 0);
  // cuDNN's attention: cuda and bf16 only; no stored dS budget to set (and none counted).
  EXPECT_EQ(parse({"--data", "x", "--device", "cuda"}).attention, "auto");  // the default: the trainer resolves it
  EXPECT_EQ(parse({"--data", "x"}).attention, "auto");
  const RunConfig cudnn = parse({"--data", "x", "--device", "cuda", "--attention", "cudnn"});
  EXPECT_EQ(cudnn.attention, "cudnn");
  EXPECT_EQ(cudnn.attention_ds_mib, 0);
  EXPECT_EQ(error_of({"--data", "x", "--device", "cuda", "--attention", "flash"}),
            "invalid attention = 'flash': expected ours, cudnn, auto");
  // auto: valid everywhere (the trainer resolves it: ours on the CPU and in fp32), our budget as given.
  EXPECT_EQ(parse({"--data", "x", "--attention", "auto"}).attention, "auto");
  EXPECT_EQ(parse({"--data", "x", "--device", "cuda", "--precision", "fp32", "--attention", "auto"}).attention,
            "auto");
  EXPECT_EQ(parse({"--data", "x", "--device", "cuda", "--attention", "auto"}).attention_ds_mib, 0);
  EXPECT_EQ(
      parse({"--data", "x", "--device", "cuda", "--attention", "auto", "--attention-ds-mib", "64"}).attention_ds_mib,
      64);
  const std::string needs = "invalid attention = 'cudnn': needs --device cuda and --precision bf16 (cuDNN's bf16 "
                            "fused attention)";
  EXPECT_EQ(error_of({"--data", "x", "--attention", "cudnn"}), needs);
  EXPECT_EQ(error_of({"--data", "x", "--device", "cuda", "--precision", "fp32", "--attention", "cudnn"}), needs);
  EXPECT_EQ(error_of({"--data", "x", "--device", "cuda", "--attention", "cudnn", "--attention-ds-mib", "64"}),
            "invalid attention-ds-mib = 64: the budget of our kernels' stored score gradients, which --attention "
            "cudnn does not run");
  // A constant LR never decays to min-lr: the defaults' 6e-5 may exceed a fine-tuning lr.
  EXPECT_EQ(error_of({"--data", "x", "--lr", "3e-5", "--lr-decay", "constant"}), "");
}

// What --attention-ds-mib does at gpt2-124m's B=16, T=1024 (192 (batch,
// head) pairs of 16 tiles, 1.0625 MiB of dS each), as the run log says it.
TEST(Config, AttentionDsBudgetLaunchesAndLogLine) {
  const auto launches = [](int64_t total, int64_t fit) {
    const AttentionDsLaunches l = attention_ds_launches(total, fit);
    return std::to_string(l.count) + " x " + std::to_string(l.pairs);
  };
  EXPECT_EQ(launches(192, 192), "1 x 192");
  EXPECT_EQ(launches(192, 500), "1 x 192");
  EXPECT_EQ(launches(192, 35), "6 x 32");   // equal launches, not 5 of 35 and one of 17
  EXPECT_EQ(launches(256, 240), "2 x 128");
  EXPECT_EQ(launches(193, 96), "3 x 65");   // the last launch has fewer (63)
  EXPECT_EQ(launches(192, 0), "0 x 0");
  const auto line = [](int64_t mib) { return describe_attention_ds(16, 1024, 12, mib << 20); };
  EXPECT_EQ(line(256), "attention backward: dQ from the stored score gradients, 204.0 MiB for all 192 (batch, head) "
                       "pairs");
  EXPECT_EQ(line(36), "attention backward: dQ from the stored score gradients in 6 launches of 32 (batch, head) "
                      "pairs, 35.1 MiB (204.0 MiB would hold all 192 at once)");
  EXPECT_EQ(line(10), "attention backward: dQ recomputed: --attention-ds-mib 10 holds the score gradients of 9 of the "
                      "192 (batch, head) pairs, under the 512 blocks a launch needs to fill a GPU (204.0 MiB would "
                      "hold them all)");
  EXPECT_EQ(line(0), "attention backward: dQ recomputed (--attention-ds-mib 0)");
  EXPECT_EQ(describe_attention_ds(2, 64, 2, 256 << 20),  // one 8 KiB tile per pair
            "attention backward: dQ from the stored score gradients, 32.0 KiB for all 4 (batch, head) pairs");
}

}  // namespace
}  // namespace gpt

namespace gpt {

// The typo rule behind those suggestions: at most 2 edits (a swap of neighbours is one), fewer than a third of the
// longer name, and no suggestion when two names are equally near.
TEST(ClosestName, NearEnoughToBeATypoAndUnambiguous) {
  EXPECT_EQ(edit_distance("stategy", "strategy"), 1);
  EXPECT_EQ(edit_distance("stpes", "steps"), 1);  // a swap
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
  EXPECT_EQ(edit_distance("", "abc"), 3);
  const std::vector<std::string> names{"steps", "seed", "strategy", "lr", "min-lr", "warmup"};
  EXPECT_EQ(closest_name("stpes", names), "steps");
  EXPECT_EQ(closest_name("sed", names), "seed");
  EXPECT_EQ(closest_name("min_lr", names), "min-lr");
  EXPECT_EQ(closest_name("l", names), "");                // 1 edit of 2 letters is not a typo
  EXPECT_EQ(closest_name("learning", names), "");         // nothing near
  EXPECT_EQ(closest_name("steps", names), "");            // itself: nothing to suggest
  EXPECT_EQ(closest_name("abcd", {"abce", "abcf"}), "");  // a tie
  EXPECT_EQ(did_you_mean("stategy", names, "--"), " (did you mean --strategy?)");
  EXPECT_EQ(did_you_mean("xyz", names), "");
  EXPECT_EQ(unknown_argument("--stategy=zero3", names),
            "command line: unknown flag --stategy (did you mean --strategy?)");
  EXPECT_EQ(unknown_argument("-x", names), "command line: unknown flag -x");
  EXPECT_EQ(unknown_argument("zero3", names), "command line: unexpected argument 'zero3'");
}

}  // namespace gpt
