// plan: predicted memory, communication and step time of every strategy and
// mesh for a model on a cluster, and the one to use. No MPI, no allocation:
//   plan --model gpt2-1.5b --ranks 64 --ranks-per-node 8 --device-mem 80GiB
//     --micro-batch 4 --seq-len 1024 --precision bf16 [--activation-checkpointing] [--recompute gelu-ln]
//     [--sample-tokens 0]
//   plan --model gpt2-1.5b --ranks 64 --global-batch 512   (gpt_train's batch flags: 8 sequences a rank, micro-batch 8)
//   plan --config run.toml --ranks 64 --ranks-per-node 8   (the run's own model, batch and precision)
// The model behind the numbers is documented in lib/strategies/planner.hpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>
#include <tuple>

#include "command_line.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/plural.hpp"
#include "io/run_config.hpp"
#include "model/flops.hpp"
#include "model/layout.hpp"
#include "strategies/planner.hpp"

int main(int argc, char** argv) {
  using namespace gpt;
  CLI::App app{"Predict memory, communication and step time per strategy; recommend one."};
  gpt::add_version_flag(app, "plan");
  std::string model = "gpt2-124m", device = "cuda", gpu = "H100", precision, reduce = "fp32", device_mem, json_out;
  int ranks = 8, rpn = 0, micro = 4, seq_len = 0, accum = 1, global_batch = 0, threads = 1, n_layer = 0, n_head = 0,
      n_embd = 0, vocab = 0, n_ctx = 0, sample_tokens = 64;
  int inter_links = 0;
  double peak_tflops = 0, intra_gbps = 0, inter_gbps = 0, mfu = 0.45, headroom = 0.9;
  double base_lat_us = -1, intra_lat_us = -1, inter_lat_us = -1, tree_lat_us = -1;  // -1: the device's default
  bool ckpt = false, eval = false;
  std::string recompute = "none", config, attention_ds_mib, attention;
  app.add_option("--config", config,
                 "a gpt_train config (TOML): the run's model, sequence length, batch, device, precision, "
                 "--recompute and samples; flags given here override it")
      ->type_name("FILE");
  app.add_option("--model", model, "preset: tiny | gpt2-124m | gpt2-350m | gpt2-774m | gpt2-1.5b")
      ->capture_default_str()
      ->type_name("CHOICE");
  app.add_option("--n-layer", n_layer, "override the preset's layers");
  app.add_option("--n-head", n_head, "override the preset's heads");
  app.add_option("--n-embd", n_embd, "override the preset's width");
  app.add_option("--vocab-size", vocab, "override the preset's vocabulary");
  app.add_option("--n-ctx", n_ctx, "override the preset's context (rows of wpe)");
  app.add_option("--ranks", ranks, "ranks in the job")->capture_default_str()->check(gpt::kPositiveInt);
  app.add_option("--ranks-per-node", rpn, "ranks per node (default: --ranks, one node)")->check(gpt::kPositiveInt);
  app.add_option("--device", device, "cuda | cpu: defaults for memory, peak and bandwidths")
      ->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--gpu", gpu,
                 "GPU name for the table of peak FLOP/s, memory and intra-node bandwidth (H100, H200, "
                 "A100-SXM4-40GB, L40S, ...)")
      ->capture_default_str();
  app.add_option("--device-mem", device_mem, "memory per rank, e.g. 80GiB (default: --gpu's on cuda, by host on cpu)")
      ->type_name("SIZE");
  app.add_option("--micro-batch", micro, "sequences per rank per micro-batch")->capture_default_str()
      ->check(gpt::kPositiveInt);
  app.add_option("--seq-len", seq_len, "training sequence length (default: the model's context)");
  CLI::Option* accum_opt = app.add_option("--accum", accum, "micro-batches per optimizer step")
                               ->capture_default_str()
                               ->check(gpt::kPositiveInt);
  app.add_option("--global-batch", global_batch,
                 "sequences per optimizer step on all ranks, as gpt_train's: accum = global / (micro-batch x "
                 "ranks); without --micro-batch, the one gpt_train fits to it (the largest count up to 8 that "
                 "divides global / ranks)")
      ->check(gpt::kPositiveInt)
      ->excludes(accum_opt);
  app.add_option("--precision", precision, "fp32 | bf16 (default: bf16 on cuda, fp32 on cpu)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--reduce-dtype", reduce, "gradient reduction dtype with bf16: fp32 | bf16")->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_flag("--activation-checkpointing", ckpt, "keep one block's activations, recompute the rest");
  app.add_flag("--eval", eval,
               "plan an evaluation (gpt_train --steps 0, as a --config of steps = 0 is): the parameters alone, one "
               "block's activations, times per batch (a forward pass); --accum does not apply");
  app.add_option("--recompute", recompute, "activations recomputed in backward: none | gelu | gelu-ln")
      ->capture_default_str()->check(CLI::IsMember({"none", "gelu", "gelu-ln"}));
  app.add_option("--attention-ds-mib", attention_ds_mib,
                 "the run's --attention-ds-mib (cuda, bf16; default 0): the attention backward's stored score "
                 "gradients count as activations")
      ->type_name("INT");
  app.add_option("--attention", attention,
                 "the run's --attention (cuda, bf16): ours | cudnn (cuDNN's backward keeps its fp32 dQ accumulator "
                 "instead of stored score gradients) | auto (gpt_train's default, decided on the GPU: the larger "
                 "count)")
      ->type_name("CHOICE");
  app.add_option("--sample-tokens", sample_tokens,
                 "the run's --sample-tokens (as gpt_train's default); > 0 counts sampling's key/value cache")
      ->capture_default_str()->check(gpt::kNonNegativeInt);
  app.add_option("--threads", threads, "CPU threads per rank (attention scratch)")->capture_default_str()
      ->check(gpt::kPositiveInt);
  app.add_option("--peak-tflops", peak_tflops, "peak per rank (default: from --gpu, or 0.05 on cpu)")
      ->check(gpt::kPositiveReal);
  app.add_option("--mfu", mfu, "fraction of peak assumed for compute")->capture_default_str()->check(gpt::kFraction);
  app.add_option("--intra-gbps", intra_gbps,
                 "GB/s a rank sends in a ring inside a node (default: --gpu's on cuda, 3 on cpu)")
      ->check(gpt::kPositiveReal);
  app.add_option("--inter-gbps", inter_gbps,
                 "GB/s of one link between nodes, per direction (default: 45 on cuda, a 400 Gb/s NIC; 1.2 on cpu)")
      ->check(gpt::kPositiveReal);
  app.add_option("--inter-links", inter_links,
                 "links between nodes per node, each --inter-gbps (default: cuda one per GPU, i.e. "
                 "--ranks-per-node; cpu 1); a ring across nodes gets its ranks' share of them")
      ->check(gpt::kPositiveInt);
  for (auto [flag, value, what] : {
           std::tuple{"--base-lat-us", &base_lat_us, "every collective (default: 8.4 on cuda, NCCL's ring; 4 on cpu)"},
           {"--intra-lat-us", &intra_lat_us, "a ring step inside a node (default: 3.4 on cuda, NVLink; 4 on cpu)"},
           {"--inter-lat-us", &inter_lat_us, "a ring step across nodes (default: 14 on cuda; 25 on cpu)"},
           {"--tree-lat-us", &tree_lat_us,
            "a tree step of an all-reduce across nodes (default: 28 on cuda; 25 on cpu)"}})
    app.add_option(flag, *value, std::string("latency in microseconds of ") + what)->check(gpt::kNonNegativeReal);
  app.add_option("--headroom", headroom, "usable fraction of device memory")->capture_default_str()
      ->check(gpt::kFraction);
  app.add_option("--json", json_out, "also write the plan as JSON to this file")->type_name("FILE");
  if (const int rc = gpt::parse_command_line(app, argc, argv); rc >= 0) return rc;
  try {
    // The run as gpt_train would see it: --config's file (read by gpt_train's
    // own parser) with the run flags given here on top; without --config,
    // every run flag with plan's defaults (gpt2-124m on H100s, micro-batch 4).
    const auto given = [&](const char* flag) { return app.count(flag) > 0; };
    std::vector<std::string> args;
    if (!config.empty()) args = {"--config", config};
    const auto pass = [&](const char* flag, const std::string& value, bool by_default) {
      if (given(flag) || (config.empty() && by_default)) args.insert(args.end(), {flag, value});
    };
    pass("--model", model, true);
    for (auto [flag, v] : {std::pair{"--n-layer", n_layer}, {"--n-head", n_head}, {"--n-embd", n_embd},
                           {"--vocab-size", vocab}, {"--n-ctx", n_ctx}})
      pass(flag, std::to_string(v), false);
    pass("--seq-len", std::to_string(seq_len), false);
    // --global-batch without --micro-batch leaves the micro-batch to fit_micro_batch, as gpt_train does.
    pass("--micro-batch", std::to_string(micro), !given("--global-batch"));
    // --global-batch, or --accum (or, without --config, its default), sets the global batch.
    if (given("--global-batch"))
      args.insert(args.end(), {"--global-batch", std::to_string(global_batch)});
    else if (config.empty() || (given("--accum") && given("--micro-batch")))
      args.insert(args.end(), {"--global-batch", std::to_string(int64_t(micro) * ranks * accum)});
    pass("--device", device, true);
    pass("--precision", precision, false);
    pass("--reduce-dtype", reduce, false);
    pass("--recompute", recompute, true);
    if (ckpt) args.push_back("--activation-checkpointing");
    pass("--sample-tokens", std::to_string(sample_tokens), true);
    pass("--device-mem", device_mem, false);
    pass("--attention-ds-mib", attention_ds_mib, false);
    pass("--attention", attention, false);
    if (eval) args.insert(args.end(), {"--steps", "0"});
    RunConfig rc = run_config_from_args(args);
    if (given("--accum")) rc.global_batch = rc.micro_batch * ranks * accum;  // the file's micro-batch
    // A file without micro-batch: the one gpt_train would fit to --ranks (the model line says which).
    fit_micro_batch(rc, ranks, config);
    // threads = 0: gpt_train's share of a node's cores (core/threads.hpp), about cores / ranks per node.
    if (!config.empty() && !given("--threads"))
      threads = rc.threads > 0 ? rc.threads
                               : std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, rpn ? rpn : ranks));
    const Workload w = run_workload(rc, ranks, threads, config);
    model = rc.model;
    device = rc.device == DeviceKind::kCuda ? "cuda" : "cpu";
    precision = rc.precision == Precision::kBf16 ? "bf16" : "fp32";
    device_mem = rc.device_mem;
    if (!given("--peak-tflops")) peak_tflops = rc.peak_tflops;  // the file's peak-tflops, as gpt_train takes it
    recompute = to_string(rc.recompute);
    ckpt = rc.activation_checkpointing;
    if (!rpn) rpn = ranks;
    if (ranks % rpn)
      throw ConfigError(fmt::format("invalid ranks-per-node = {}: --ranks {} is not a multiple of it", rpn, ranks));
    ClusterSpec c = ClusterSpec::defaults(device, ranks, rpn);
    if (device == "cuda") {
      c.peak_flops = gpu_peak_flops(gpu, precision == "bf16");
      if (const int64_t memory = gpu_memory_bytes(gpu); memory > 0) c.device_memory = memory;
      if (const double bw = gpu_ring_bandwidth(gpu); bw > 0) c.intra_bw = bw;
      if (c.peak_flops == 0 && peak_tflops == 0)
        throw ConfigError(fmt::format("unknown gpu = '{}': expected a name holding one of {} as words; or give "
                                      "--peak-tflops (and --device-mem, --intra-gbps)",
                                      gpu, gpu_names()));
    }
    if (peak_tflops > 0) c.peak_flops = peak_tflops * 1e12;
    if (!device_mem.empty()) c.device_memory = parse_bytes(device_mem, "device-mem");
    if (intra_gbps > 0) c.intra_bw = intra_gbps * 1e9;
    if (inter_gbps > 0) c.inter_bw = inter_gbps * 1e9;
    if (inter_links > 0) c.inter_links = inter_links;
    if (base_lat_us >= 0) c.base_lat = base_lat_us * 1e-6;
    if (intra_lat_us >= 0) c.intra_lat = intra_lat_us * 1e-6;
    if (inter_lat_us >= 0) c.inter_lat = inter_lat_us * 1e-6;
    if (tree_lat_us >= 0) c.tree_lat = tree_lat_us * 1e-6;
    c.assumed_mfu = mfu;
    c.headroom = headroom;
    const Plan p = make_plan(w, c);
    const ParamLayout layout(w.model);
    // A --config of steps = 0 plans gpt_train's evaluation: the parameters alone and one block's activations.
    const std::string memory_note =
        !w.trains             ? ", evaluation only (steps = 0): the parameters alone; times per batch (a forward pass)"
        : ckpt                ? ", activation checkpointing"
        : recompute != "none" ? ", recompute " + recompute
                              : std::string();
    std::printf("model %s: %.1fM parameters, L=%d H=%d C=%d V=%d, T=%d, micro-batch %d x accum %d, %s%s\n",
                model_name(model, w.model).c_str(), layout.model_numel() / 1e6, w.model.n_layer, w.model.n_head,
                w.model.n_embd, w.model.vocab_size, w.T(), w.micro_batch, w.accum, precision.c_str(),
                memory_note.c_str());
    std::printf("cluster: %s, %d per node (%s), %s per rank, %.4g TFLOP/s x %.0f%% MFU, "
                "%.3g GB/s inside a node, %d x %.3g GB/s across; latency %.3g us per collective + %.3g us per "
                "ring step inside a node, %.3g us across, %.3g us per tree step\n\n",
                count_of(ranks, "rank").c_str(), rpn, count_of(ranks / rpn, "node").c_str(),
                format_bytes(double(c.device_memory)).c_str(), c.peak_flops / 1e12,
                100 * c.assumed_mfu, c.intra_bw / 1e9, c.inter_links, c.inter_bw / 1e9, c.base_lat * 1e6,
                c.intra_lat * 1e6, c.inter_lat * 1e6, c.tree_lat * 1e6);
    std::fputs(format_plan(p).c_str(), stdout);
    if (!json_out.empty()) {
      std::ofstream f(json_out);
      f << plan_to_json(p).dump(2) << "\n";
      if (!f) throw Error(fmt::format("cannot write {}", json_out));
    }
    return p.best >= 0 ? 0 : 3;  // 3: nothing fits
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
