// ckpt_tool: inspect, verify and export checkpoints written by gpt_train.
//   ckpt_tool list CKPT_DIR [--verify]      the checkpoints in a --ckpt-dir (also set aside, unfinished),
//                                           and which one --resume auto would start from
//   ckpt_tool info DIR                      metadata, tensors, shapes, sizes, who wrote it
//   ckpt_tool verify DIR                    completeness, shapes, checksums (exit 1 on any problem)
//   ckpt_tool export DIR OUT.h5             full parameter tensors under nanoGPT names
//   ckpt_tool export --format llmc DIR OUT.bin   llm.c's GPT-2 model file (fp32, version 3)
//   ckpt_tool export --format hf DIR OUTDIR      Hugging Face model directory (model.safetensors, config.json)
//   ckpt_tool import IN.bin OUT.h5          llm.c model file -> HDF5 export format (gpt_train --init-from takes either)
//   ckpt_tool compare A B [--tolerance X] [--atol Y]   the two states tensor by tensor (any strategies, world
//                                           sizes): exit 0 when every tensor's relative difference is within X or its
//                                           largest absolute one within Y (0, 0: bit for bit)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "comm/mpi_env.hpp"
#include "command_line.hpp"
#include "core/plural.hpp"
#include "io/checkpoint_tools.hpp"
#include "io/model_import.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ckpt_tool: inspect, verify and export gpt_train checkpoints"};
  gpt::add_version_flag(app, "ckpt_tool");
  app.require_subcommand(1);
  std::string dir, out, format = "hdf5";
  bool deep = false;
  auto* list = app.add_subcommand("list", "the checkpoints in a --ckpt-dir, and which one --resume auto would take");
  list->add_option("dir", dir, "the --ckpt-dir")->required()->type_name("DIR");
  list->add_flag("--verify", deep, "also verify each published checkpoint (reads every tensor)");
  auto* info = app.add_subcommand("info", "metadata and tensors");
  info->add_option("dir", dir, "checkpoint directory")->required()->type_name("DIR");
  auto* verify = app.add_subcommand("verify", "completeness, shapes and checksums");
  verify->add_option("dir", dir, "checkpoint directory")->required()->type_name("DIR");
  auto* exp = app.add_subcommand("export", "consolidated HDF5, llm.c model file or Hugging Face model directory");
  exp->add_option("--format", format, "hdf5 | llmc | hf")
      ->capture_default_str()
      ->check(CLI::IsMember({"hdf5", "llmc", "hf"}));
  exp->add_option("dir", dir, "checkpoint directory")->required()->type_name("DIR");
  exp->add_option("out", out, "output file (hf: output directory)")->required()->type_name("PATH");
  std::string vocab, merges;
  exp->add_option("--vocab", vocab, "hf: GPT-2 tokenizer encoder.json / vocab.json (default: the run's)")
      ->type_name("FILE");
  exp->add_option("--merges", merges, "hf: GPT-2 tokenizer vocab.bpe / merges.txt (default: the run's)")
      ->type_name("FILE");
  std::string in;
  auto* imp = app.add_subcommand("import", "llm.c .bin to the HDF5 export format");
  imp->add_option("in", in, "llm.c model file")->required()->type_name("FILE");
  imp->add_option("out", out, "output HDF5 file")->required()->type_name("FILE");
  std::string other, json_out;
  double tolerance = 0;
  bool all = false;
  auto* cmp = app.add_subcommand("compare", "two checkpoints' states, tensor by tensor (exit 1 when they differ)");
  cmp->add_option("a", dir, "checkpoint directory")->required()->type_name("DIR");
  cmp->add_option("b", other, "checkpoint directory")->required()->type_name("DIR");
  cmp->add_option("--tolerance", tolerance,
                  "largest relative difference ||a - b|| / ||a|| a tensor may have (0: bit for bit)")
      ->capture_default_str()
      ->check(gpt::kNonNegativeReal);
  double atol = 0;
  cmp->add_option("--atol", atol,
                  "a tensor whose largest |a - b| is at most this is within too, whatever its relative difference "
                  "(for tensors near zero)")
      ->capture_default_str()
      ->check(gpt::kNonNegativeReal);
  cmp->add_flag("--all", all, "list every tensor, not only those above the tolerance");
  cmp->add_option("--json", json_out, "also write the comparison as JSON to this file")->type_name("FILE");
  if (const int rc = gpt::parse_command_line(app, argc, argv); rc >= 0) return rc;  // --help, --version: no MPI
  gpt::MpiEnv env(&argc, &argv);  // the HDF5 library is the MPI build; serial use still wants MPI up
  try {
    if (*list) {
      const auto j = gpt::list_checkpoints(dir, deep);
      static const std::map<std::string, std::string> what = {{"published", "published"},
                                                              {"incomplete", "no COMPLETE marker"},
                                                              {"damaged", "set aside by --resume auto"},
                                                              {"partial", "a write that did not finish"}};
      for (const auto& e : j["entries"]) {
        std::string by;
        if (e.contains("strategy"))
          by = fmt::format("{} on {} (mesh {})", e["strategy"].get<std::string>(),
                           gpt::count_of(e.value("world_size", 0), "rank"), e.value("mesh", std::string("?")));
        std::string state = what.at(e["kind"].get<std::string>());
        if (e.contains("problems"))
          state = e["problems"].empty() ? "published, verified"
                                        : fmt::format("published, DAMAGED: {}", e["problems"][0].get<std::string>());
        std::printf("%-26s step %-8lld %10.1f MiB  %-34s %s\n", e["name"].get<std::string>().c_str(),
                    (long long)e["step"], double(e["bytes"].get<uint64_t>()) / 1048576.0, by.c_str(), state.c_str());
      }
      if (j["entries"].empty()) std::printf("%s: no checkpoints\n", dir.c_str());
      bool published = false;
      for (const auto& e : j["entries"]) published = published || e["kind"] == "published";
      std::string start = "nothing (a fresh start)";
      if (!j["resume_auto"].is_null())
        start = fmt::format("{}{}", j["resume_auto"].get<std::string>(),
                            deep ? " (verified)" : " (if it loads; --verify checks)");
      else if (published)
        start = "nothing: every published checkpoint is damaged, and gpt_train --resume auto stops with an error";
      std::printf("--resume auto would start from: %s\n", start.c_str());
    } else if (*info) {
      const auto j = gpt::checkpoint_info(dir);
      const auto& a = j["attrs"];
      // A checkpoint after skipped non-finite steps has had fewer updates than steps.
      const long long updates = a.value("optimizer_updates", a["step"].get<long long>());
      // A checkpoint written at a skipped step also holds how many were skipped in a row.
      const long long in_a_row = a.value("skipped_in_a_row", 0LL);
      const std::string skipped = updates == a["step"].get<long long>()
                                      ? ""
                                      : fmt::format(" ({} optimizer updates{})", updates,
                                                    in_a_row > 0 ? fmt::format(", {} skipped in a row", in_a_row) : "");
      const std::string build = a.contains("build") ? ", build " + a["build"].get<std::string>() : "";
      std::printf("%s: %s v%lld, step %lld%s, written by %s on %s (mesh %s%s)%s\n", dir.c_str(),
                  a["format"].get<std::string>().c_str(), (long long)a["format_version"], (long long)a["step"],
                  skipped.c_str(), a["strategy"].get<std::string>().c_str(),
                  gpt::count_of(a["world_size"].get<int64_t>(), "rank").c_str(), a["mesh"].get<std::string>().c_str(),
                  build.c_str(), a["complete"].get<bool>() ? "" : " [INCOMPLETE]");
      const long long sequences = a.value("data_sequences", 0LL);  // 0 or absent: not recorded
      const std::string of = sequences > 0 ? fmt::format(" of {} sequences", sequences) : "";
      std::printf("model %s, data position epoch %lld offset %lld%s, seed %llu\n",
                  a["model"].get<std::string>().c_str(), (long long)a["data_epoch"], (long long)a["data_offset"],
                  of.c_str(), (unsigned long long)a["seed"]);
      long long total = 0;
      for (const auto& t : j["tensors"]) {
        std::string shape;
        for (auto d : t["shape"]) shape += (shape.empty() ? "" : " x ") + std::to_string(d.get<long long>());
        std::printf("  %-56s [%s] %lld bytes\n", t["name"].get<std::string>().c_str(), shape.c_str(),
                    (long long)t["bytes"]);
        total += t["bytes"].get<long long>();
      }
      std::printf("%zu tensors, %lld bytes\n", j["tensors"].size(), total);
    } else if (*verify) {
      const auto problems = gpt::verify_checkpoint(dir);
      for (const auto& p : problems) std::printf("BAD: %s\n", p.c_str());
      const bool none = !gpt::not_a_checkpoint(dir).empty();  // nothing there to call damaged
      std::printf("%s: %s\n", dir.c_str(), problems.empty() ? "ok" : none ? "not a checkpoint" : "damaged");
      return problems.empty() ? 0 : 1;
    } else if (*exp) {
      if (format == "llmc") {
        gpt::export_llmc(dir, out);
      } else if (format == "hf") {
        std::printf("wrote %s (hf): %s\n", out.c_str(), gpt::export_hf(dir, out, vocab, merges).c_str());
        return 0;
      } else {
        gpt::export_hdf5(dir, out);
      }
      std::printf("wrote %s (%s)\n", out.c_str(), format.c_str());
    } else if (*cmp) {
      const auto j = gpt::compare_checkpoints(dir, other, tolerance, atol);
      for (const char* side : {"a", "b"}) {
        const auto& m = j[side];
        const long long step = m["step"], updates = m.value("optimizer_updates", step);
        std::printf("%s: %s: step %lld%s, %s on %s (mesh %s), data position epoch %lld offset %lld, seed %llu\n", side,
                    m["path"].get<std::string>().c_str(), step,
                    updates == step ? "" : fmt::format(" ({} optimizer updates)", updates).c_str(),
                    m["strategy"].get<std::string>().c_str(),
                    gpt::count_of(m["world_size"].get<int64_t>(), "rank").c_str(), m["mesh"].get<std::string>().c_str(),
                    (long long)m["data_epoch"], (long long)m["data_offset"], (unsigned long long)m["seed"]);
      }
      // inf and NaN are null in JSON: a tensor zero in a alone, or not finite.
      const auto num = [](const nlohmann::json& v) {
        return v.is_null() ? std::string("nan/inf") : fmt::format("{:.3g}", v.get<double>());
      };
      for (const auto& t : j["tensors"]) {
        if (t["within"].get<bool>() && !all) continue;  // listed: those above the tolerance, or with --all every one
        std::printf("  %-56s %9lld of %-9lld differ  max |a-b| %-9s rel %-9s%s\n", t["name"].get<std::string>().c_str(),
                    (long long)t["differing"], (long long)t["numel"], num(t["max_abs"]).c_str(), num(t["rel"]).c_str(),
                    t["within"].get<bool>() ? "" : "  ABOVE TOLERANCE");
      }
      const size_t count = j["tensors"].size();
      if (j["identical"].get<bool>()) {
        std::printf("identical: all %zu tensors bit for bit\n", count);
      } else {
        const auto& worst = j["worst"];
        std::printf(
            "%s: %lld of %zu tensors differ, %lld above --tolerance %g%s; the largest relative difference %s in "
            "%s\n",
            j["within_tolerance"].get<bool>() ? "within tolerance" : "different", (long long)j["differing_tensors"],
            count, (long long)j["above_tolerance"], tolerance,
            atol > 0 ? fmt::format(" and --atol {:g}", atol).c_str() : "", num(worst["rel"]).c_str(),
            worst["name"].get<std::string>().c_str());
      }
      if (!json_out.empty()) {
        std::ofstream f(json_out);
        if (!(f << j.dump(1) << "\n")) throw std::runtime_error(fmt::format("{}: cannot write the JSON", json_out));
      }
      return j["within_tolerance"].get<bool>() ? 0 : 1;
    } else if (*imp) {
      gpt::llmc_to_hdf5(in, out);
      std::printf("wrote %s\n", out.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
