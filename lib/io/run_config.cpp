#include "io/run_config.hpp"

#include <CLI/CLI.hpp>
#include <mpi.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "core/build_info.hpp"
#include "core/bytes.hpp"
#include "core/closest_name.hpp"
#include "core/error.hpp"
#include "core/nearest_multiples.hpp"
#include "core/plural.hpp"
#include "io/parse_or_error.hpp"
#include "model/attention_ds.hpp"

namespace gpt {
namespace {

// Model overrides are applied after the preset, in this order.
struct Pending {
  std::optional<int> n_layer, n_head, n_embd, n_ctx, vocab_size;
  std::optional<Precision> precision;
  std::optional<int> attention_ds_mib;
  bool lr_decay_ratio = false;  // given explicitly (it excludes lr-decay-steps)
};

template <typename T>
T parse_number(const std::string& key, const std::string& v) {
  T out{};
  const char* b = v.data();
  const char* e = v.data() + v.size();
  auto [p, ec] = std::from_chars(b, e, out);
  if (ec != std::errc() || p != e)
    throw ConfigError(fmt::format("invalid {} = '{}': expected {}", key, v,
                                  std::is_unsigned_v<T>  ? "an integer >= 0"
                                  : std::is_integral_v<T> ? "an integer"
                                                          : "a number"));
  return out;
}

int parse_int(const std::string& key, const std::string& v, int lo, int hi = INT32_MAX) {
  const long long x = parse_number<long long>(key, v);
  if (x < lo || x > hi) {
    throw ConfigError(hi == INT32_MAX ? fmt::format("invalid {} = {}: must be >= {}", key, v, lo)
                                      : fmt::format("invalid {} = {}: must be in [{}, {}]", key, v, lo, hi));
  }
  return static_cast<int>(x);
}

double parse_double(const std::string& key, const std::string& v, double lo, double hi) {
  const double x = parse_number<double>(key, v);
  if (!(x >= lo && x <= hi)) throw ConfigError(fmt::format("invalid {} = {}: must be in [{}, {}]", key, v, lo, hi));
  return x;
}

float parse_float(const std::string& key, const std::string& v, double lo, double hi) {
  return static_cast<float>(parse_double(key, v, lo, hi));
}

// A duration in the forms of SLURM's --time, in whole numbers: minutes,
// MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. Returns seconds.
double parse_duration(const std::string& key, const std::string& v) {
  const auto bad = [&] {
    return ConfigError(
        fmt::format("invalid {} = '{}': expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                    "D-HH:MM:SS (the forms of SLURM's --time)",
                    key, v));
  };
  const auto whole = [&](std::string_view part) {
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string_view::npos) throw bad();
    return double(std::stoll(std::string(part)));
  };
  std::string_view rest = v;
  double days = -1;
  if (const size_t dash = rest.find('-'); dash != std::string_view::npos) {
    days = whole(rest.substr(0, dash));
    rest.remove_prefix(dash + 1);
  }
  std::vector<double> parts;
  for (size_t colon; (colon = rest.find(':')) != std::string_view::npos; rest.remove_prefix(colon + 1))
    parts.push_back(whole(rest.substr(0, colon)));
  parts.push_back(whole(rest));
  if (parts.size() > 3) throw bad();
  if (days >= 0) {  // D-HH[:MM[:SS]]
    parts.resize(3, 0.0);
    return ((days * 24 + parts[0]) * 60 + parts[1]) * 60 + parts[2];
  }
  if (parts.size() == 3) return (parts[0] * 60 + parts[1]) * 60 + parts[2];  // HH:MM:SS
  return parts[0] * 60 + (parts.size() == 2 ? parts[1] : 0.0);               // MM[:SS]
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "true" || v == "1" || v == "on") return true;
  if (v == "false" || v == "0" || v == "off") return false;
  throw ConfigError(fmt::format("invalid {} = '{}': expected true or false", key, v));
}

std::string one_of(const std::string& key, const std::string& v, std::initializer_list<const char*> allowed,
                   const std::string& why = "") {
  for (const char* a : allowed)
    if (v == a) return v;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  throw ConfigError(fmt::format("invalid {} = '{}': expected {}{}", key, v, list, why));
}

struct Key {
  std::string name;  // flag name without dashes, '-' separated
  std::string help;
  // The value's kind as --help shows it (INT, FLOAT, CHOICE: one of the
  // names the help lists, ...); nullptr: a switch that takes no value.
  const char* type;
  std::function<void(RunConfig&, Pending&, const std::string&)> apply;
};

std::vector<Key> keys() {
  using C = RunConfig;
  using P = Pending;
  using S = const std::string&;
  return {
      {"model", "preset: tiny | gpt2-124m | gpt2-350m | gpt2-774m | gpt2-1.5b", "CHOICE",
       [](C& c, P&, S v) {
         c.model = v;
         c.gpt = preset(v);
       }},
      {"n-layer", "override: transformer blocks", "INT", [](C&, P& p, S v) { p.n_layer = parse_int("n-layer", v, 1); }},
      {"n-head", "override: attention heads", "INT", [](C&, P& p, S v) { p.n_head = parse_int("n-head", v, 1); }},
      {"n-embd", "override: width", "INT", [](C&, P& p, S v) { p.n_embd = parse_int("n-embd", v, 1); }},
      {"n-ctx", "override: the model's maximum context (rows of wpe)", "INT",
       [](C&, P& p, S v) { p.n_ctx = parse_int("n-ctx", v, 1); }},
      {"vocab-size", "override: vocabulary size (must cover the data's token ids)", "INT",
       [](C&, P& p, S v) { p.vocab_size = parse_int("vocab-size", v, 2, 65536); }},
      {"seq-len", "training sequence length T (<= the model's context; default: the context)", "INT",
       [](C& c, P&, S v) { c.seq_len = parse_int("seq-len", v, 1); }},
      {"strategy", "data-parallel strategy: ddp | zero1 | zero2 | zero3 | hybrid | auto (the planner's choice)",
       "CHOICE",
       [](C& c, P&, S v) {
         c.strategy = one_of("strategy", v, {"ddp", "zero1", "zero2", "zero3", "hybrid", "auto"});
       }},
      {"device-mem",
       "strategy auto: memory per rank to plan for, e.g. 8GiB (default: cpu, host memory / ranks per node; cuda, "
       "the GPU's memory / the ranks on it)",
       "SIZE",
       [](C& c, P&, S v) {
         parse_bytes(v, "device-mem");
         c.device_mem = v;
       }},
      {"hybrid-inner", "sharding inside a hybrid shard group: zero3 | zero2", "CHOICE",
       [](C& c, P&, S v) {
         c.hybrid_inner = one_of("hybrid-inner", v, {"zero3", "zero2"});
       }},
      {"bucket-mb", "ddp: gradient all-reduce bucket size in MiB", "FLOAT",
       [](C& c, P&, S v) { c.bucket_mb = parse_float("bucket-mb", v, 0, 1e6); }},
      {"device", "cpu | cuda (one GPU per rank: local rank modulo the visible GPUs)", "CHOICE",
       [](C& c, P&, S v) {
         c.device = one_of("device", v, {"cpu", "cuda"}) == "cuda" ? DeviceKind::kCuda : DeviceKind::kCpu;
       }},
      {"precision",
       "bf16 (mixed: bf16 compute, fp32 master weights; cuda only) | fp32 (default: bf16 on cuda, fp32 on cpu)",
       "CHOICE",
       [](C&, P& p, S v) {
         p.precision = one_of("precision", v, {"bf16", "fp32"}) == "bf16" ? Precision::kBf16 : Precision::kFp32;
       }},
      {"gemm-autotune",
       "cuda: in the first step, time up to N of cuBLASLt's algorithms for each matrix-product shape and keep the "
       "fastest (0: the heuristic's first pick; results may then differ between runs in the last bits)",
       "INT", [](C& c, P&, S v) { c.gemm_autotune = parse_int("gemm-autotune", v, 0, 64); }},
      {"peak-tflops",
       "peak TFLOP/s per rank at the run's precision, for MFU and --strategy auto (0: cuda, the datasheet's for the "
       "GPU's name, shared by the ranks on it; cpu, the GEMM throughput measured at start-up). For a GPU the table "
       "does not know, or to measure against another peak",
       "FLOAT", [](C& c, P&, S v) { c.peak_tflops = parse_double("peak-tflops", v, 0, 1e6); }},
      {"attention-ds-mib",
       "cuda, bf16: MiB the attention backward may keep its score gradients dS in, so that dQ = dS K is one matrix "
       "product instead of recomputing the scores and dP (three); 0: recompute (the default; a budget bounds it, "
       "the (batch, head) pairs are covered in chunks that fit)",
       "INT", [](C&, P& p, S v) { p.attention_ds_mib = parse_int("attention-ds-mib", v, 0, 1 << 20); }},
      {"attention",
       "cuda, bf16: ours (our tensor-core kernels) | cudnn (cuDNN's fused attention at the training shape; "
       "needs cuDNN 9.8+ where the program runs; its dQ is accumulated with atomics, so runs may differ in the last "
       "bits) | auto (the default: cudnn where every rank can run it at the training shape, else ours; the log says "
       "which and why)",
       "CHOICE",
       [](C& c, P&, S v) {
         c.attention = one_of("attention", v, {"ours", "cudnn", "auto"});
       }},
      {"reduce-dtype", "type of gradient reduction: fp32 | bf16 (half the bytes; cuda only)", "CHOICE",
       [](C& c, P&, S v) {
         c.reduce_dtype = one_of("reduce-dtype", v, {"fp32", "bf16"});
       }},
      {"comm",
       "collective backend: auto (nccl on cuda when every rank has its own GPU, else mpi) | mpi | nccl (cuda only). "
       "On cuda, mpi stages device buffers through host memory",
       "CHOICE",
       [](C& c, P&, S v) {
         c.comm = one_of("comm", v, {"auto", "mpi", "nccl"});
       }},
      {"comm-timeout",
       "seconds a rank waits for the other ranks (a collective on the host, or the GPU, which may wait for one) "
       "before it declares the job stuck and ends every rank; NCCL errors are polled meanwhile (0: no limit)",
       "FLOAT", [](C& c, P&, S v) { c.comm_timeout_s = parse_float("comm-timeout", v, 0, 1e9); }},
      {"mesh", "RxS device mesh: R replicas of shard groups of S ranks (default: nodes x ranks per node)", "RxS",
       [](C& c, P&, S v) { c.mesh = v; }},
      {"threads", "CPU threads per rank (0: OMP_NUM_THREADS, else this rank's share of the node's cores)", "INT",
       [](C& c, P&, S v) { c.threads = parse_int("threads", v, 0); }},
      {"cpu-gemm",
       "cpu: the library of the fp32 matrix products: auto (openblas on a rank of one thread, else eigen) | eigen "
       "(threaded by OpenMP) | openblas (its own threads, as many as --threads; they compete with OpenMP's)",
       "CHOICE",
       [](C& c, P&, S v) {
         c.cpu_gemm = one_of("cpu-gemm", v, {"auto", "eigen", "openblas"});
       }},
      {"data", "training shards: comma-separated globs of llm.c .bin files", "GLOBS",
       [](C& c, P&, S v) { c.data = v; }},
      {"val-data", "validation shards (globs)", "GLOBS", [](C& c, P&, S v) { c.val_data = v; }},
      {"tokenizer", "byte | gpt2: how samples are decoded and HellaSwag encoded", "CHOICE",
       [](C& c, P&, S v) {
         c.tokenizer = one_of("tokenizer", v, {"byte", "gpt2"});
       }},
      {"vocab", "gpt2 tokenizer: encoder.json / vocab.json", "FILE", [](C& c, P&, S v) { c.vocab = v; }},
      {"merges", "gpt2 tokenizer: vocab.bpe / merges.txt", "FILE", [](C& c, P&, S v) { c.merges = v; }},
      {"global-batch", "sequences per optimizer step over all ranks", "INT",
       [](C& c, P&, S v) {
         c.global_batch = parse_int("global-batch", v, 1);
         c.global_batch_given = true;
       }},
      {"micro-batch",
       "sequences per forward/backward on one rank (default: 8, or in training the largest count up to 8 that "
       "divides global-batch / ranks)",
       "INT",
       [](C& c, P&, S v) {
         c.micro_batch = parse_int("micro-batch", v, 1);
         c.micro_batch_given = true;
       }},
      {"steps", "optimizer steps (0: evaluate and sample the model only, as initialised, imported or resumed)", "INT",
       [](C& c, P&, S v) { c.steps = parse_int("steps", v, 0); }},
      {"lr", "peak learning rate", "FLOAT", [](C& c, P&, S v) { c.lr = parse_float("lr", v, 0, 10); }},
      {"min-lr", "learning rate at the end of the decay", "FLOAT",
       [](C& c, P&, S v) { c.min_lr = parse_float("min-lr", v, 0, 10); }},
      {"warmup", "linear warm-up steps", "INT", [](C& c, P&, S v) { c.warmup = parse_int("warmup", v, 0); }},
      {"lr-decay", "shape of the decay from lr to min-lr: cosine | linear | sqrt (1 - sqrt) | constant (no decay)",
       "CHOICE", [](C& c, P&, S v) { c.lr_decay = parse_lr_decay(v); }},
      {"lr-decay-ratio",
       "fraction of the steps after the warm-up that the decay spans, at the end; before it the LR stays at lr "
       "(1: decay from the end of the warm-up; e.g. 0.2: warmup-stable-decay)",
       "FLOAT",
       [](C& c, P& p, S v) {
         const double ratio = parse_number<double>("lr-decay-ratio", v);
         if (!(ratio > 0 && ratio <= 1))
           throw ConfigError(fmt::format("invalid lr-decay-ratio = {}: must be in (0, 1]", v));
         c.lr_decay_ratio = float(ratio);
         p.lr_decay_ratio = true;
       }},
      {"lr-decay-steps",
       "length of the decay in steps, at the end, whatever --steps is (0: lr-decay-ratio decides); "
       "an extended run keeps its cool-down's length",
       "INT", [](C& c, P&, S v) { c.lr_decay_steps = parse_int("lr-decay-steps", v, 0); }},
      {"weight-decay", "AdamW decoupled weight decay (2-D weights only)", "FLOAT",
       [](C& c, P&, S v) { c.adam.weight_decay = parse_float("weight-decay", v, 0, 10); }},
      {"beta1", "AdamW beta1", "FLOAT", [](C& c, P&, S v) { c.adam.beta1 = parse_float("beta1", v, 0, 0.999999); }},
      {"beta2", "AdamW beta2", "FLOAT", [](C& c, P&, S v) { c.adam.beta2 = parse_float("beta2", v, 0, 0.999999); }},
      {"eps", "AdamW epsilon", "FLOAT", [](C& c, P&, S v) { c.adam.eps = parse_float("eps", v, 1e-30, 1); }},
      {"clip", "clip gradients to this global norm (0: off)", "FLOAT",
       [](C& c, P&, S v) { c.clip = parse_float("clip", v, 0, 1e9); }},
      {"skip-nonfinite",
       "a step whose loss or gradient norm is NaN/Inf is never applied: skip up to N such steps in a row, "
       "end the run on one more (0: end it on the first)",
       "INT", [](C& c, P&, S v) { c.skip_nonfinite = parse_int("skip-nonfinite", v, 0); }},
      {"seed", "seed of initialisation and data order", "INT",
       [](C& c, P&, S v) { c.seed = parse_number<uint64_t>("seed", v); }},
      {"activation-checkpointing", "keep only block inputs; recompute blocks in backward", nullptr,
       [](C& c, P&, S v) { c.activation_checkpointing = parse_bool("activation-checkpointing", v); }},
      {"recompute",
       "activations recomputed in backward instead of kept: none, gelu (GELU outputs: -27% per block) or gelu-ln "
       "(also LayerNorm outputs: -40%)",
       "CHOICE", [](C& c, P&, S v) { c.recompute = parse_recompute(v); }},
      {"ckpt-dir", "directory of checkpoints (one step_NNNNNNNN directory each)", "DIR",
       [](C& c, P&, S v) { c.ckpt_dir = v; }},
      {"ckpt-every", "checkpoint every N steps (0: only at the end)", "INT",
       [](C& c, P&, S v) { c.ckpt_every = parse_int("ckpt-every", v, 0); }},
      {"keep-last", "keep only the newest K checkpoints (0: all)", "INT",
       [](C& c, P&, S v) { c.keep_last = parse_int("keep-last", v, 0); }},
      {"ckpt-async", "snapshot the state and write checkpoints in the background", nullptr,
       [](C& c, P&, S v) { c.ckpt_async = parse_bool("ckpt-async", v); }},
      {"time-limit",
       "stop as on SIGUSR1 (a checkpoint, exit 75) once the next step would end past this long after the start: "
       "minutes, MM:SS, HH:MM:SS or D-HH:MM:SS, as SLURM's --time (0: no limit)",
       "TIME", [](C& c, P&, S v) { c.time_limit_s = parse_duration("time-limit", v); }},
      {"resume", "auto (newest complete checkpoint in ckpt-dir that loads, if any) or a checkpoint directory",
       "auto|DIR", [](C& c, P&, S v) { c.resume = v; }},
      {"init-from",
       "start from weights: an llm.c .bin, a Hugging Face GPT-2 (model.safetensors, its directory, or a sharded "
       "model's model.safetensors.index.json), an HDF5 export, or a checkpoint (its parameters only: fresh "
       "moments, step 0; ignored when resuming)",
       "PATH", [](C& c, P&, S v) { c.init_from = v; }},
      {"metrics", "JSON-lines metrics file (rank 0)", "FILE", [](C& c, P&, S v) { c.metrics = v; }},
      {"trace", "Chrome trace-event JSON (one process per rank; open in Perfetto)", "FILE",
       [](C& c, P&, S v) { c.trace = v; }},
      {"eval-every", "validation loss (and HellaSwag) every N steps (0: only at the end)", "INT",
       [](C& c, P&, S v) { c.eval_every = parse_int("eval-every", v, 0); }},
      {"val-batches", "micro-batches per rank per validation (0: as many as the validation data hold)", "INT",
       [](C& c, P&, S v) { c.val_batches = parse_int("val-batches", v, 0); }},
      {"hellaswag", "HellaSwag JSON lines (hellaswag_val.jsonl): accuracy whenever the validation runs", "FILE",
       [](C& c, P&, S v) { c.hellaswag = v; }},
      {"hellaswag-examples", "HellaSwag: the file's first N examples (0: all)", "INT",
       [](C& c, P&, S v) { c.hellaswag_examples = parse_int("hellaswag-examples", v, 0); }},
      {"sample-every", "print a decoded sample every N steps (0: only at the end)", "INT",
       [](C& c, P&, S v) { c.sample_every = parse_int("sample-every", v, 0); }},
      {"sample-tokens", "tokens per sample (0: no samples)", "INT",
       [](C& c, P&, S v) { c.sample_tokens = parse_int("sample-tokens", v, 0); }},
      {"sample-prompt", "text the samples continue (default: a new document)", "TEXT",
       [](C& c, P&, S v) { c.sample_prompt = v; }},
      {"sample-temperature", "divides the logits of samples (0: greedy, the most likely token)", "FLOAT",
       [](C& c, P&, S v) { c.sample_temperature = parse_float("sample-temperature", v, 0, 100); }},
      {"sample-top-k", "samples draw from the K most likely tokens only (0: all)", "INT",
       [](C& c, P&, S v) { c.sample_top_k = parse_int("sample-top-k", v, 0); }},
      {"log-every", "progress line every N steps", "INT",
       [](C& c, P&, S v) { c.log_every = parse_int("log-every", v, 1); }},
      {"log-level", "trace | debug | info | warn | error", "CHOICE",
       [](C& c, P&, S v) {
         c.log_level = one_of("log-level", v, {"trace", "debug", "info", "warn", "error"});
       }},
  };
}

std::string normalise_key(std::string k) {
  for (char& ch : k)
    if (ch == '_') ch = '-';
  return k;
}

std::string toml_value_string(const std::string& file, const std::string& key, const toml::node& n) {
  if (auto s = n.as_string()) return s->get();
  if (auto i = n.as_integer()) return std::to_string(i->get());
  if (auto f = n.as_floating_point()) return fmt::format("{}", f->get());
  if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
  throw ConfigError(fmt::format("{}: key '{}' must be a string, number or boolean", file, key));
}

}  // namespace

namespace {

// A RunConfig as a run without a config file or flags gets it.
RunConfig default_run_config() {
  RunConfig c;
  c.gpt = preset(c.model);
  return c;
}

// " [default: X]" for --help, from the defaults' to_json(); nothing where
// the help already says what the default is, where the key overrides the
// preset (its default is the preset's), or where the default is empty.
std::string default_note(const Key& k, const nlohmann::json& defaults) {
  std::string key = k.name;
  std::replace(key.begin(), key.end(), '-', '_');
  const auto it = defaults.find(key);
  if (it == defaults.end() || k.help.find("default") != std::string::npos || k.help.rfind("override", 0) == 0)
    return "";
  const std::string v = it->is_string() ? it->get<std::string>() : it->dump();
  return v.empty() ? "" : " [default: " + v + "]";
}

}  // namespace

namespace {
bool parse_sources(int argc, const char* const* argv, RunConfig& cfg, bool need_data);

// --version: the program's build (set by its main) and the MPI library, which
// MPI lets a program ask before MPI_Init.
std::string gpt_train_version() {
  std::string v = version_line("gpt_train", program_build());
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
    const std::string library(mpi, size_t(len));
    v += "\nMPI: " + library.substr(0, library.find_first_of(",\n"));
  }
  return v;
}
}  // namespace

bool parse_run_config(int argc, const char* const* argv, RunConfig& cfg) {
  return parse_sources(argc, argv, cfg, /*need_data=*/true);
}

RunConfig run_config_from_args(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"gpt_train"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  RunConfig cfg;
  parse_sources(int(argv.size()), argv.data(), cfg, /*need_data=*/false);
  return cfg;
}

RunConfig run_config_from_file(const std::string& path) { return run_config_from_args({"--config", path}); }

namespace {

bool parse_sources(int argc, const char* const* argv, RunConfig& cfg, bool need_data) {
  const std::vector<Key> table = keys();
  CLI::App app{"gpt_train: data-parallel GPT-2 training (see README.md)"};
  app.set_config();  // we read TOML ourselves: --config is ours
  app.footer(
      "Exit codes: 0 the run finished; 1 an error (its 'error:' line says which); 75 stopped early on\n"
      "SIGUSR1, SIGTERM or SIGINT after the current step (checkpointed with --ckpt-dir; --resume auto continues).\n"
      "A second such signal ends the process at once.");
  // A flag given more than once takes its last value, as argparse's and
  // getopt's programs do (CLI11's default is an error): the job scripts and
  // scripts/sweep put the user's flags after their own, to override them.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string config_file;
  app.add_option("--config", config_file, "TOML file with any of the keys below; flags override it")->type_name("FILE");
  app.set_version_flag("--version", gpt_train_version,
                       "print what this program was built from (commit, CUDA architectures, MPI) and exit");
  std::map<std::string, std::string> cli_values;
  std::map<std::string, bool> cli_flags;
  const nlohmann::json defaults = default_run_config().to_json();
  for (const Key& k : table) {
    if (!k.type) {
      app.add_flag("--" + k.name, cli_flags[k.name], k.help);
    } else {
      app.add_option("--" + k.name, cli_values[k.name], k.help + default_note(k, defaults))->type_name(k.type);
    }
  }
  try {
    // A mistyped flag is named with the one it likely meant (io/parse_or_error.hpp).
    if (const std::string error = parse_or_error(app, argc, argv); !error.empty()) throw ConfigError(error);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    return false;
  } catch (const CLI::CallForVersion& e) {
    fmt::print("{}\n", e.what());
    return false;
  }

  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() < 2 || opt->get_expected_min() == 0) continue;  // a switch repeated means the same
    const std::vector<std::string>& given = opt->results();
    std::string values;
    for (const std::string& v : given) values += (values.empty() ? "" : ", ") + (v.empty() ? "''" : v);
    cfg.repeated_flags.push_back(
        fmt::format("command line: {} given {} times ({}): the last is used", opt->get_name(), given.size(), values));
  }

  // Preset first (model may be in either source; the command line wins).
  Pending pending;
  struct Setting {
    const Key* key;
    std::string value;
    std::string file;  // the config file it came from; "" for the command line
  };
  std::vector<Setting> ordered;
  auto find = [&](const std::string& name) -> const Key* {
    for (const Key& k : table)
      if (k.name == name) return &k;
    return nullptr;
  };
  if (!config_file.empty()) {
    toml::table t;
    if (std::FILE* f = std::fopen(config_file.c_str(), "r")) {
      std::fclose(f);
    } else {  // toml++ would say "0:0: File could not be opened for reading"
      throw ConfigError(fmt::format("{}: cannot open the config file: {}", config_file, std::strerror(errno)));
    }
    try {
      t = toml::parse_file(config_file);
    } catch (const toml::parse_error& e) {
      throw ConfigError(fmt::format("{}:{}:{}: {}", config_file, e.source().begin.line, e.source().begin.column,
                                    e.description()));
    }
    for (auto&& [k, node] : t) {
      const std::string key = normalise_key(std::string(k.str()));
      const Key* spec = find(key);
      if (!spec) {
        std::vector<std::string> names;
        const bool underscores = std::string(k.str()).find('_') != std::string::npos;
        for (const Key& known : table) {
          names.push_back(known.name);
          if (underscores) std::replace(names.back().begin(), names.back().end(), '-', '_');
        }
        const std::string near = closest_name(std::string(k.str()), names);
        throw ConfigError(fmt::format("{}: unknown key '{}'{}", config_file, std::string(k.str()),
                                      near.empty() ? "" : " (did you mean '" + near + "'?)"));
      }
      ordered.push_back({spec, toml_value_string(config_file, key, node), config_file});
    }
  }
  for (const Key& k : table) {
    auto* opt = app.get_option("--" + k.name);
    if (opt->count() == 0) continue;
    ordered.push_back({&k, !k.type ? (cli_flags[k.name] ? "true" : "false") : cli_values[k.name], ""});
  }
  // The preset must be applied before any override of its fields.
  cfg.gpt = preset(cfg.model);
  std::stable_partition(ordered.begin(), ordered.end(), [](const Setting& s) { return s.key->name == "model"; });
  for (const Setting& s : ordered) {
    try {
      s.key->apply(cfg, pending, s.value);
    } catch (const ConfigError& e) {  // a file's bad value names the file
      if (s.file.empty()) throw;
      throw ConfigError(fmt::format("{}: {}", s.file, e.what()));
    }
  }
  if (pending.n_layer) cfg.gpt.n_layer = *pending.n_layer;
  if (pending.n_head) cfg.gpt.n_head = *pending.n_head;
  if (pending.n_embd) cfg.gpt.n_embd = *pending.n_embd;
  if (pending.n_ctx) cfg.gpt.seq_len = *pending.n_ctx;
  if (pending.vocab_size) cfg.gpt.vocab_size = *pending.vocab_size;
  cfg.gpt.validate();
  const bool cuda = cfg.device == DeviceKind::kCuda;
  cfg.precision = pending.precision.value_or(cuda ? Precision::kBf16 : Precision::kFp32);
  if (!cuda && cfg.precision == Precision::kBf16)
    throw ConfigError("invalid precision = 'bf16': needs --device cuda (the CPU path is fp32)");
  if (!cuda && cfg.reduce_dtype != "fp32")
    throw ConfigError(fmt::format("invalid reduce-dtype = '{}': needs --device cuda (the CPU path is fp32)",
                                  cfg.reduce_dtype));
  if (!cuda && cfg.comm == "nccl") throw ConfigError("invalid comm = 'nccl': needs --device cuda");
  if (!cuda && cfg.gemm_autotune != 0)
    throw ConfigError(fmt::format("invalid gemm-autotune = {}: needs --device cuda (cuBLASLt's algorithms)",
                                  cfg.gemm_autotune));
  if (!cuda && pending.attention_ds_mib)
    throw ConfigError(fmt::format("invalid attention-ds-mib = {}: needs --device cuda (the tensor-core attention)",
                                  *pending.attention_ds_mib));
  if (cfg.attention == "cudnn") {
    if (!cuda || cfg.precision != Precision::kBf16)
      throw ConfigError("invalid attention = 'cudnn': needs --device cuda and --precision bf16 (cuDNN's bf16 fused "
                        "attention)");
    if (pending.attention_ds_mib)
      throw ConfigError(fmt::format("invalid attention-ds-mib = {}: the budget of our kernels' stored score "
                                    "gradients, which --attention cudnn does not run",
                                    *pending.attention_ds_mib));
  }
  cfg.attention_ds_mib = cfg.attention == "cudnn"
                             ? 0
                             : pending.attention_ds_mib.value_or(cuda ? int(kAttentionDsDefaultBytes >> 20) : 0);

  if (cfg.seq_len == 0) cfg.seq_len = cfg.gpt.seq_len;
  if (cfg.seq_len > cfg.gpt.seq_len)
    throw ConfigError(fmt::format("invalid seq-len = {}: larger than the model's context n-ctx = {}", cfg.seq_len,
                                  cfg.gpt.seq_len));
  if (cfg.min_lr > cfg.lr && cfg.lr_decay != LRDecay::kConstant)  // a constant LR never reaches min-lr
    throw ConfigError(fmt::format("invalid min-lr = {}: larger than lr = {}", cfg.min_lr, cfg.lr));
  if (cfg.lr_decay_steps > 0 && pending.lr_decay_ratio)
    throw ConfigError(fmt::format("invalid lr-decay-steps = {}: give lr-decay-steps or lr-decay-ratio, not both",
                                  cfg.lr_decay_steps));
  if (cfg.steps > 0 && cfg.lr_decay_steps > std::max(0, cfg.steps - cfg.warmup))  // --steps 0 has no schedule
    throw ConfigError(fmt::format("invalid lr-decay-steps = {}: larger than steps - warmup = {} - {} = {}",
                                  cfg.lr_decay_steps, cfg.steps, cfg.warmup, std::max(0, cfg.steps - cfg.warmup)));
  // --steps 0 takes no training step, so it has no global batch: an evaluation reads micro-batches alone.
  // A micro-batch not given is fitted to the world size later (fit_micro_batch).
  if (cfg.steps > 0 && cfg.micro_batch_given &&
      (cfg.micro_batch > cfg.global_batch || cfg.global_batch % cfg.micro_batch != 0))
    throw ConfigError(fmt::format("invalid global-batch = {}: must be a multiple of micro-batch = {}",
                                  cfg.global_batch, cfg.micro_batch));
  if (need_data && cfg.data.empty() && cfg.steps > 0)  // --steps 0 trains nothing, so needs no training data
    throw ConfigError("missing data: give --data GLOB (llm.c token shards), or --steps 0 to evaluate only");
  if (cfg.strategy == "auto" && !cfg.mesh.empty())
    throw ConfigError(fmt::format("invalid mesh = '{}': strategy auto chooses the mesh; give one or the other",
                                  cfg.mesh));
  if (cfg.resume == "auto" && cfg.ckpt_dir.empty())
    throw ConfigError("invalid resume = 'auto': needs --ckpt-dir to look in");
  return true;
}

}  // namespace

std::string fit_micro_batch(RunConfig& cfg, int world, const std::string& source) {
  if (cfg.steps == 0 || cfg.micro_batch_given || world <= 0) return "";
  const std::string in = source.empty() ? "" : " in " + source;
  if (cfg.global_batch % world != 0)
    throw ConfigError(
        fmt::format("invalid global-batch = {}{}: must be a multiple of the {} data-parallel ranks "
                    "(each takes global-batch / ranks sequences a step): {} would do{}",
                    cfg.global_batch, cfg.global_batch_given ? in : " (the default)", world,
                    nearest_multiples(cfg.global_batch, world), cfg.global_batch_given ? "" : " (--global-batch N)"));
  const int share = cfg.global_batch / world;
  int m = std::min(share, kDefaultMicroBatch);
  while (share % m != 0) --m;
  if (m == cfg.micro_batch) return "";
  cfg.micro_batch = m;
  return fmt::format(
      "micro-batch {}: not given, so the largest count up to {} that divides a rank's {} sequences "
      "a step (global-batch {} / {}); --micro-batch sets it",
      m, kDefaultMicroBatch, share, cfg.global_batch, count_of(world, "rank"));
}

nlohmann::json RunConfig::to_json() const {
  // Floats as their shortest decimal form (0.9, not 0.8999999761581421).
  auto f = [](float x) { return std::stod(fmt::format("{}", x)); };
  return {
      {"model", model},
      {"n_layer", gpt.n_layer},
      {"n_head", gpt.n_head},
      {"n_embd", gpt.n_embd},
      {"n_ctx", gpt.seq_len},
      {"vocab_size", gpt.vocab_size},
      {"padded_vocab", gpt.padded_vocab()},
      {"seq_len", seq_len},
      {"strategy", strategy},
      {"hybrid_inner", hybrid_inner},
      {"device_mem", device_mem},
      {"bucket_mb", bucket_mb},
      {"device", device == DeviceKind::kCuda ? "cuda" : "cpu"},
      {"precision", precision == Precision::kBf16 ? "bf16" : "fp32"},
      {"reduce_dtype", reduce_dtype},
      {"gemm_autotune", gemm_autotune},
      {"peak_tflops", peak_tflops},
      {"attention_ds_mib", attention_ds_mib},
      {"attention", attention},
      {"comm", comm},
      {"comm_timeout", comm_timeout_s},
      {"time_limit_s", time_limit_s},
      {"mesh", mesh},
      {"threads", threads},
      {"cpu_gemm", cpu_gemm},
      {"data", data},
      {"val_data", val_data},
      {"tokenizer", tokenizer},
      {"vocab", vocab},
      {"merges", merges},
      {"global_batch", global_batch},
      {"micro_batch", micro_batch},
      {"steps", steps},
      {"lr", f(lr)},
      {"min_lr", f(min_lr)},
      {"warmup", warmup},
      {"lr_decay", to_string(lr_decay)},
      {"lr_decay_ratio", f(float(lr_decay_ratio))},
      {"lr_decay_steps", lr_decay_steps},
      {"weight_decay", f(adam.weight_decay)},
      {"beta1", f(adam.beta1)},
      {"beta2", f(adam.beta2)},
      {"eps", f(adam.eps)},
      {"clip", f(clip)},
      {"skip_nonfinite", skip_nonfinite},
      {"seed", seed},
      {"activation_checkpointing", activation_checkpointing},
      {"recompute", to_string(recompute)},
      {"ckpt_dir", ckpt_dir},
      {"ckpt_every", ckpt_every},
      {"keep_last", keep_last},
      {"ckpt_async", ckpt_async},
      {"resume", resume},
      {"init_from", init_from},
      {"trace", trace},
      {"eval_every", eval_every},
      {"val_batches", val_batches},
      {"hellaswag", hellaswag},
      {"hellaswag_examples", hellaswag_examples},
      {"sample_every", sample_every},
      {"sample_tokens", sample_tokens},
      {"sample_prompt", sample_prompt},
      {"sample_temperature", f(sample_temperature)},
      {"sample_top_k", sample_top_k},
      {"log_every", log_every},
      {"log_level", log_level},
  };
}

}  // namespace gpt
