// Checkpoints: resume under the same strategy is bit-identical to the
// uninterrupted run; a zero3 checkpoint resumes under every other strategy
// and world size (resharding on load) within 1e-6 relative, and so does a
// one-rank ddp checkpoint under zero3; damaged, mismatched and partial
// checkpoints are refused or ignored. Launched on 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "fixtures.hpp"
#include "io/checkpoint.hpp"
#include "io/checkpoint_tools.hpp"
#include "io/h5.hpp"
#include "io/model_import.hpp"
#include "model/layout.hpp"
#include "mpi_test_env.hpp"
#include "strategies/trainer.hpp"
#include "trace_reader.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

struct RunResult {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
};

RunResult train(const RunConfig& c, MPI_Comm comm) {
  Trainer t(c, comm);
  RunResult r;
  r.losses = t.run().losses;
  r.params = t.full_params();
  return r;
}

std::string fresh_dir(const std::string& name) {
  const std::string d = (fs::temp_directory_path() / ("gpt_ckpt_test_" + name)).string();
  if (test::env().rank() == 0) fs::remove_all(d);
  MPI_Barrier(MPI_COMM_WORLD);
  return d;
}

// The uninterrupted run saves at step 4 (and at the end); the continuation
// from step 4 must reproduce steps 5..8.
RunConfig eight_steps(const std::string& strategy) {
  RunConfig c = test::small_run();
  c.steps = 8;
  c.strategy = strategy;
  return c;
}

// ddp's and hybrid's replicas each write their share of the state they all
// hold (UnitSlice's write range): the checkpoint is whole all the same, and
// ddp's resumes under zero3 too.
TEST(Checkpoint, SameStrategyResumeIsBitIdentical) {
  const int W = test::env().size();
  const std::string hybrid_mesh = W == 4 ? "2x2" : fmt::format("{}x1", W);  // replica groups of 2 or 1 ranks
  for (std::string s : {"ddp", "zero1", "zero2", "zero3", "hybrid"}) {
    SCOPED_TRACE(s);
    const std::string dir = fresh_dir("same_" + s);
    RunConfig a = eight_steps(s);
    if (s == "hybrid") a.mesh = hybrid_mesh;
    a.ckpt_dir = dir;
    a.ckpt_every = 4;
    const RunResult full = train(a, MPI_COMM_WORLD);
    RunConfig b = eight_steps(s);
    b.mesh = a.mesh;
    b.resume = dir + "/step_00000004";
    const RunResult cont = train(b, MPI_COMM_WORLD);
    ASSERT_EQ(cont.losses.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(cont.losses[i], full.losses[4 + i]) << "step " << 5 + i;
    EXPECT_EQ(cont.params, full.params);
    if (s == "ddp") {
      RunConfig c = eight_steps("zero3");
      c.resume = b.resume;
      const RunResult z = train(c, MPI_COMM_WORLD);
      ASSERT_EQ(z.losses.size(), 4u);
      for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(z.losses[i], full.losses[4 + i], 1e-6 * full.losses[4 + i]);
    }
  }
}

// A resume computes no initial values: its read gives every value. A fresh
// run computes them once over the mesh: under ddp each rank its 1/N,
// summed in one all-reduce per unit inside the `initial values` slice (the
// values equal one rank's: SameStrategyResumeIsBitIdentical's and the
// strategy tests' comparisons).
TEST(Checkpoint, ResumeComputesNoInitialValues) {
  const int W = test::env().size();
  const std::string dir = fresh_dir("init_values");
  RunConfig a = test::small_run();
  a.steps = 2;
  a.ckpt_dir = dir;
  a.trace = dir + "_fresh.json";
  train(a, MPI_COMM_WORLD);
  RunConfig b = a;
  b.steps = 3;
  b.resume = "auto";
  b.trace = dir + "_resumed.json";
  train(b, MPI_COMM_WORLD);
  if (test::env().rank() != 0) return;
  const test::ParsedTrace fresh = test::read_trace(a.trace), resumed = test::read_trace(b.trace);
  for (int r = 0; r < W; ++r) {
    SCOPED_TRACE(fmt::format("rank {}", r));
    EXPECT_EQ(fresh.named(r, "initial values").size(), 1u);
    EXPECT_EQ(fresh.named(r, "checkpoint read").size(), 0u);
    EXPECT_EQ(resumed.named(r, "initial values").size(), 0u) << "the resume computed the initial values it reads";
    EXPECT_EQ(resumed.named(r, "checkpoint read").size(), 1u);
  }
  if (W == 1) return;  // one rank computes everything and exchanges nothing
  const test::Slice init = fresh.named(0, "initial values").at(0);
  int inside = 0;
  for (const test::Slice& c : fresh.collectives.at(0).at("all_reduce")) inside += c.b >= init.b && c.e <= init.e;
  EXPECT_EQ(inside, int(ParamLayout(a.gpt).num_units())) << "ddp's ranks do not share the initial values' work";
}

// Written in the background from a snapshot while training continues: the
// checkpoint must hold the state of its step exactly.
TEST(Checkpoint, AsyncCheckpointResumesBitIdentical) {
  for (std::string s : {"ddp", "zero3"}) {
    SCOPED_TRACE(s);
    const std::string dir = fresh_dir("async_" + s);
    RunConfig a = eight_steps(s);
    a.ckpt_dir = dir;
    a.ckpt_every = 4;
    a.ckpt_async = true;
    const RunResult full = train(a, MPI_COMM_WORLD);
    EXPECT_TRUE(fs::exists(dir + "/step_00000008/COMPLETE"));  // the last write is joined before run() returns
    RunConfig b = eight_steps(s);
    b.resume = dir + "/step_00000004";
    const RunResult cont = train(b, MPI_COMM_WORLD);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(cont.losses[i], full.losses[4 + i]) << "step " << 5 + i;
    EXPECT_EQ(cont.params, full.params);
  }
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << what << " step " << 5 + i;
}

TEST(Checkpoint, Zero3CheckpointResumesUnderEveryStrategyAndWorldSize) {
  const int W = test::env().size();
  const std::string dir = fresh_dir("reshard");
  RunConfig a = eight_steps("zero3");
  a.ckpt_dir = dir;
  a.ckpt_every = 4;
  const RunResult full = train(a, MPI_COMM_WORLD);
  const std::vector<double> want(full.losses.begin() + 4, full.losses.end());
  const std::string ckpt = dir + "/step_00000004";

  struct Target {
    std::string strategy, mesh;
    bool self;  // one rank (MPI_COMM_SELF) instead of the world
  };
  std::vector<Target> targets = {{"ddp", "", true}, {"zero2", "", true}, {"ddp", "", false},
                                 {"zero1", "", false}, {"zero2", "", false}, {"zero3", "", false}};
  if (W == 4) targets.push_back({"hybrid", "2x2", false});
  if (W == 2) targets.push_back({"hybrid", "2x1", false});
  for (const Target& t : targets) {
    const std::string what = fmt::format("{} {} on {} ranks", t.strategy, t.mesh, t.self ? 1 : W);
    SCOPED_TRACE(what);
    RunConfig b = eight_steps(t.strategy);
    b.mesh = t.mesh;
    b.resume = ckpt;
    if (t.self) b.micro_batch = b.global_batch;
    expect_close(train(b, t.self ? MPI_COMM_SELF : MPI_COMM_WORLD).losses, want, what);
  }
}

TEST(Checkpoint, OneRankDdpCheckpointResumesUnderZero3) {
  const int r = test::env().rank();
  // Each rank makes its own one-rank run (its own directory), then all
  // resume rank 0's checkpoint together under zero3.
  const std::string base = fresh_dir("from_ddp1");
  RunConfig a = eight_steps("ddp");
  a.micro_batch = a.global_batch;
  a.ckpt_dir = base + fmt::format("/rank{}", r);
  a.ckpt_every = 4;
  const RunResult full = train(a, MPI_COMM_SELF);
  MPI_Barrier(MPI_COMM_WORLD);
  RunConfig b = eight_steps("zero3");
  b.resume = base + "/rank0/step_00000004";
  expect_close(train(b, MPI_COMM_WORLD).losses, {full.losses.begin() + 4, full.losses.end()}, "ddp@1 -> zero3");
}

// Flips the bits `mask` of byte `offset` of a dataset's data in an HDF5 file
// (a damaged copy that still opens).
void flip_bit(const std::string& file, const std::string& dataset, int64_t offset, char mask) {
  haddr_t at;
  {
    h5::Id f = h5::open_file(file, MPI_COMM_NULL);
    h5::Id d = h5::open_dataset(f.get(), dataset);
    at = H5Dget_offset(d.get());
  }
  ASSERT_NE(at, HADDR_UNDEF);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(at) + offset);
  char c;
  f.read(&c, 1);
  c ^= mask;
  f.seekp(std::streamoff(at) + offset);
  f.write(&c, 1);
}

std::string load_error(const std::string& path, const RunConfig& c) {
  try {
    RunConfig b = c;
    b.resume = path;
    Trainer t(b, MPI_COMM_WORLD);
    t.run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, DamagedMismatchedAndPartialCheckpointsAreRefused) {
  const std::string dir = fresh_dir("damage");
  RunConfig a = eight_steps("zero2");
  a.steps = 2;
  a.ckpt_dir = dir;
  const RunResult saved = train(a, MPI_COMM_WORLD);
  const std::string good = dir + "/step_00000002";
  ASSERT_EQ(latest_checkpoint(dir), good);
  MPI_Barrier(MPI_COMM_WORLD);  // every rank has looked before rank 0 adds the damaged copy

  // One flipped bit inside a tensor's data.
  const std::string bad = dir + "/step_00000003";
  if (test::env().rank() == 0) {
    fs::copy(good, bad, fs::copy_options::recursive);
    flip_bit(bad + "/state.h5", "/exp_avg/transformer.h.1.mlp.c_fc.weight", 1001, 0x10);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  RunConfig b = eight_steps("zero2");
  const std::string e1 = load_error(bad, b);
  EXPECT_NE(e1.find("state.h5"), std::string::npos) << e1;
  EXPECT_NE(e1.find("checksum mismatch"), std::string::npos) << e1;

  // A different model.
  RunConfig wide = b;
  wide.gpt.n_embd = 128;
  const std::string e2 = load_error(good, wide);
  EXPECT_NE(e2.find("model mismatch: n_embd = 64 in the checkpoint, 128 in this run"), std::string::npos) << e2;

  // The update counts are checked against the step: optimizer_updates in
  // [0, step], skipped_in_a_row in [0, step - optimizer_updates]. A
  // checkpoint without them (written before they existed) still loads.
  const std::string counts = fresh_dir("damage_counts");
  const std::string too_many = counts + "/step_00000002", in_a_row = counts + "/step_00000003",
                    older = counts + "/step_00000004";
  if (test::env().rank() == 0) {
    auto edit = [&](const std::string& to, const char* name, int64_t value) {
      fs::create_directories(to);
      fs::copy(good, to, fs::copy_options::recursive);
      const hid_t f = H5Fopen((to + "/state.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      ASSERT_GE(f, 0);
      for (const char* k : {"optimizer_updates", "skipped_in_a_row"})
        if (value < 0 || std::string(k) == name) {
          ASSERT_GE(H5Adelete(f, k), 0);
        }
      if (value >= 0) h5::set_attr(f, name, value);
      H5Fclose(f);
    };
    edit(too_many, "optimizer_updates", 3);
    edit(in_a_row, "skipped_in_a_row", 1);
    edit(older, "", -1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string e6 = load_error(too_many, b), e7 = load_error(in_a_row, b);
  EXPECT_NE(e6.find(too_many + "/state.h5: optimizer_updates = 3 outside [0, step = 2]"), std::string::npos) << e6;
  EXPECT_NE(e7.find(in_a_row + "/state.h5: skipped_in_a_row = 1 outside [0, step - optimizer_updates = 0]"),
            std::string::npos)
      << e7;
  EXPECT_EQ(load_error(older, b), "");

  // Partial checkpoints (no COMPLETE marker) are never picked by auto and refused by path.
  if (test::env().rank() == 0) {
    fs::remove(bad + "/COMPLETE");
    fs::create_directories(dir + "/.partial-step_00000009");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(latest_checkpoint(dir), good);
  const std::string e3 = load_error(bad, b);
  EXPECT_NE(e3.find("not a complete checkpoint"), std::string::npos) << e3;

  // A truncated file and a missing file are refused naming the file.
  const std::string cut = dir + "/step_00000005", gone = dir + "/step_00000006";
  if (test::env().rank() == 0) {
    fs::copy(good, cut, fs::copy_options::recursive);
    fs::resize_file(cut + "/state.h5", fs::file_size(cut + "/state.h5") / 2);
    fs::copy(good, gone, fs::copy_options::recursive);
    fs::remove(gone + "/state.h5");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string e4 = load_error(cut, b), e5 = load_error(gone, b);
  EXPECT_NE(e4.find(cut + "/state.h5"), std::string::npos) << e4;
  EXPECT_NE(e5.find(gone + "/state.h5: cannot open"), std::string::npos) << e5;
  EXPECT_FALSE(verify_checkpoint(cut).empty());

  // ckpt_tool's verify: the good one is sound; the damaged one names both problems.
  if (test::env().rank() == 0) {
    EXPECT_TRUE(verify_checkpoint(good).empty());
    const auto problems = verify_checkpoint(bad);
    ASSERT_EQ(problems.size(), 2u);
    EXPECT_NE(problems[0].find("no COMPLETE marker"), std::string::npos) << problems[0];
    EXPECT_NE(problems[1].find("checksum mismatch in /exp_avg/transformer.h.1.mlp.c_fc.weight"), std::string::npos)
        << problems[1];
  }
  MPI_Barrier(MPI_COMM_WORLD);
  (void)saved;
}

// --resume auto passes over damaged checkpoints to the newest one that
// loads, continues from it as a resume of it would, and sets the damaged
// ones aside so that --keep-last cannot prune the good one away behind them.
// Not past another model's checkpoint, and with nothing loadable it stops
// without renaming anything (a fresh start would throw the run away).
TEST(Checkpoint, ResumeAutoPassesOverDamagedCheckpoints) {
  const std::string dir = fresh_dir("auto_damaged");
  RunConfig a = eight_steps("zero2");
  a.ckpt_dir = dir;
  a.ckpt_every = 2;
  const RunResult full = train(a, MPI_COMM_WORLD);
  ASSERT_EQ(published_checkpoints(dir).size(), 4u);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string s6 = dir + "/step_00000006", s8 = dir + "/step_00000008";
  if (test::env().rank() == 0) {
    flip_bit(s8 + "/state.h5", "/params/transformer.h.0.mlp.c_proj.weight", 77, 0x02);
    fs::resize_file(s6 + "/state.h5", fs::file_size(s6 + "/state.h5") / 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // Another model's checkpoint is an error, not damage: nothing is passed over.
  RunConfig wide = eight_steps("zero2");
  wide.gpt.n_embd = 128;
  wide.ckpt_dir = dir;
  wide.resume = "auto";
  const std::string e1 = load_error("auto", wide);
  EXPECT_NE(e1.find(s8 + "/state.h5: model mismatch: n_embd = 64 in the checkpoint, 128 in this run"),
            std::string::npos)
      << e1;
  EXPECT_TRUE(fs::exists(s8 + "/COMPLETE"));

  // Step 8 fails its checksum, step 6 is truncated: the run continues from
  // step 4, as a resume of step 4 does, bit for bit.
  RunConfig b = eight_steps("zero2");
  b.ckpt_dir = dir;
  b.ckpt_every = 2;
  b.keep_last = 1;
  b.resume = "auto";
  const RunResult cont = train(b, MPI_COMM_WORLD);
  ASSERT_EQ(cont.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(cont.losses[i], full.losses[4 + i]) << "step " << 5 + i;
  EXPECT_EQ(cont.params, full.params);
  // Set aside, and kept by --keep-last 1, which pruned step 4 and the new step 6.
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(fs::exists(dir + "/damaged-step_00000008/state.h5"));
  EXPECT_TRUE(fs::exists(dir + "/damaged-step_00000006/state.h5"));
  EXPECT_EQ(published_checkpoints(dir), std::vector<std::string>{s8});
  if (test::env().rank() == 0) {
    EXPECT_TRUE(verify_checkpoint(s8).empty());
    // ckpt_tool list: what is there, by step, and what --resume auto would take.
    fs::create_directories(dir + "/.partial-step_00000010");
    const nlohmann::json l = list_checkpoints(dir, true);
    std::vector<std::string> seen;
    for (const auto& e : l["entries"])
      seen.push_back(e["name"].get<std::string>() + " " + e["kind"].get<std::string>());
    EXPECT_EQ(seen, (std::vector<std::string>{"damaged-step_00000006 damaged", "damaged-step_00000008 damaged",
                                              "step_00000008 published", ".partial-step_00000010 partial"}));
    EXPECT_EQ(l["resume_auto"], "step_00000008");
    EXPECT_EQ(l["entries"][2]["strategy"], "zero2");
    EXPECT_EQ(l["entries"][2]["world_size"], test::env().size());
    EXPECT_TRUE(l["entries"][2]["problems"].empty());
    fs::remove_all(dir + "/.partial-step_00000010");
  }

  // The only checkpoint damaged: an error naming it, and nothing renamed. A
  // second damaged step 8 would be set aside as damaged-step_00000008.2.
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::env().rank() == 0) flip_bit(s8 + "/state.h5", "/exp_avg_sq/transformer.ln_f.weight", 9, 0x40);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string e2 = load_error("auto", b);
  EXPECT_NE(e2.find(fmt::format("resume auto: the only checkpoint in {} cannot be read: step_00000008: {}/state.h5: "
                                "checksum mismatch in /exp_avg_sq/transformer.ln_f.weight",
                                dir, s8)),
            std::string::npos)
      << e2;
  EXPECT_TRUE(fs::exists(s8 + "/COMPLETE"));
  EXPECT_FALSE(fs::exists(dir + "/damaged-step_00000008.2"));
  if (test::env().rank() == 0) {  // list agrees: only a verified list sees step 8 is damaged
    EXPECT_EQ(list_checkpoints(dir, false)["resume_auto"], "step_00000008");
    const nlohmann::json l = list_checkpoints(dir, true);
    EXPECT_TRUE(l["resume_auto"].is_null());
    ASSERT_EQ(l["entries"][2]["problems"].size(), 1u);
    EXPECT_NE(l["entries"][2]["problems"][0].get<std::string>().find("checksum mismatch"), std::string::npos);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Exports carry exactly the trained parameters: the HDF5 export under
// nanoGPT names, the llm.c file with its header, order and padded wte, the
// Hugging Face directory with its safetensors layout and config.
TEST(Checkpoint, ExportsHoldTheModelsParameters) {
  const std::string dir = fresh_dir("export");
  RunConfig a = eight_steps("zero3");
  a.steps = 2;
  a.ckpt_dir = dir;
  const RunResult r = train(a, MPI_COMM_WORLD);
  if (test::env().rank() != 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  const ParamLayout layout(a.gpt);
  const std::string ckpt = dir + "/step_00000002";
  export_hdf5(ckpt, dir + "/export.h5");
  {
    h5::Id f = h5::open_file(dir + "/export.h5", MPI_COMM_NULL);
    for (size_t u = 0; u < layout.num_units(); ++u)
      for (const TensorSpec& t : layout.unit(u).tensors) {
        h5::Id d = h5::open_dataset(f.get(), t.name);
        std::vector<float> v(size_t(t.init_numel));
        h5::read_range(d.get(), v.data(), 0, t.init_numel, false);
        const std::vector<float> want(r.params[u].begin() + t.offset, r.params[u].begin() + t.offset + t.init_numel);
        ASSERT_EQ(v, want) << t.name;
      }
  }
  export_llmc(ckpt, dir + "/model.bin");
  std::ifstream f(dir + "/model.bin", std::ios::binary);
  int32_t h[256];
  f.read(reinterpret_cast<char*>(h), sizeof h);
  const GPTConfig& c = a.gpt;
  EXPECT_EQ(h[0], 20240326);
  EXPECT_EQ(h[1], 3);
  EXPECT_EQ((std::vector<int32_t>{h[2], h[3], h[4], h[5], h[6], h[7]}),
            (std::vector<int32_t>{c.seq_len, c.vocab_size, c.n_layer, c.n_head, c.n_embd, c.padded_vocab()}));
  EXPECT_EQ(int64_t(fs::file_size(dir + "/model.bin")), 1024 + 4 * layout.total_numel());
  std::vector<float> wte(size_t(c.padded_vocab()) * c.n_embd), wpe(size_t(c.seq_len) * c.n_embd);
  f.read(reinterpret_cast<char*>(wte.data()), std::streamsize(4 * wte.size()));
  f.read(reinterpret_cast<char*>(wpe.data()), std::streamsize(4 * wpe.size()));
  const auto& emb = r.params[layout.embedding_unit()];
  EXPECT_TRUE(std::equal(wte.begin(), wte.end(), emb.begin()));  // padded rows are zero on both sides
  EXPECT_TRUE(std::equal(wpe.begin(), wpe.end(), emb.begin() + layout.wpe_offset()));
  // llm.c -> HDF5 import reproduces the HDF5 export bit for bit.
  llmc_to_hdf5(dir + "/model.bin", dir + "/imported.h5");
  {
    h5::Id x = h5::open_file(dir + "/export.h5", MPI_COMM_NULL), y = h5::open_file(dir + "/imported.h5", MPI_COMM_NULL);
    for (size_t u = 0; u < layout.num_units(); ++u)
      for (const TensorSpec& t : layout.unit(u).tensors) {
        std::vector<float> a(size_t(t.init_numel)), b(size_t(t.init_numel));
        h5::Id da = h5::open_dataset(x.get(), t.name), db = h5::open_dataset(y.get(), t.name);
        h5::read_range(da.get(), a.data(), 0, t.init_numel, false);
        h5::read_range(db.get(), b.data(), 0, t.init_numel, false);
        ASSERT_EQ(a, b) << t.name;
      }
  }
  // Hugging Face: safetensors with GPT2LMHeadModel's names and Conv1D's
  // [in, out] weights, and a config.json of the same model.
  export_hf(ckpt, dir + "/hf");
  {
    std::ifstream st(dir + "/hf/model.safetensors", std::ios::binary);
    unsigned char len[8];
    st.read(reinterpret_cast<char*>(len), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    ASSERT_EQ(n % 8, 0u) << "header padded to 8 bytes";
    std::string json(n, '\0');
    st.read(json.data(), std::streamsize(n));
    const auto header = nlohmann::json::parse(json);
    EXPECT_EQ(header["__metadata__"]["format"], "pt");
    EXPECT_FALSE(header.contains("lm_head.weight"));  // tied to wte
    uint64_t next = 0;
    int tensors = 0;
    for (size_t u = 0; u < layout.num_units(); ++u)
      for (const TensorSpec& t : layout.unit(u).tensors) {
        SCOPED_TRACE(t.name);
        ASSERT_TRUE(header.contains(t.name));
        const auto& h = header[t.name];
        EXPECT_EQ(h["dtype"], "F32");
        const auto shape = h["shape"].get<std::vector<int64_t>>();
        const auto offsets = h["data_offsets"].get<std::vector<uint64_t>>();
        EXPECT_EQ(offsets[0], next) << "tensors back to back in layout order";
        next = offsets[1];
        ASSERT_EQ(offsets[1] - offsets[0], 4 * uint64_t(t.init_numel));
        std::vector<float> v(size_t(t.init_numel));
        st.seekg(std::streamoff(8 + n + offsets[0]));
        st.read(reinterpret_cast<char*>(v.data()), std::streamsize(4 * v.size()));
        const float* want = r.params[u].data() + t.offset;
        const bool conv1d = t.name.find("c_attn.weight") != std::string::npos ||
                            t.name.find("c_proj.weight") != std::string::npos ||
                            t.name.find("c_fc.weight") != std::string::npos;
        const auto stored = stored_shape(t);
        if (conv1d) {
          ASSERT_EQ(shape, (std::vector<int64_t>{stored[1], stored[0]}));
          for (int64_t i = 0; i < shape[0]; ++i)
            for (int64_t j = 0; j < shape[1]; ++j)
              ASSERT_EQ(v[size_t(i * shape[1] + j)], want[j * shape[0] + i]) << i << "," << j;
        } else {
          ASSERT_EQ(shape, stored);
          ASSERT_TRUE(std::equal(v.begin(), v.end(), want));
        }
        ++tensors;
      }
    EXPECT_EQ(tensors, 4 + 12 * a.gpt.n_layer);
    EXPECT_EQ(header.size(), size_t(tensors) + 1);
    EXPECT_EQ(fs::file_size(dir + "/hf/model.safetensors"), 8 + n + next);
    const auto config = nlohmann::json::parse(std::ifstream(dir + "/hf/config.json"));
    EXPECT_EQ(config["model_type"], "gpt2");
    EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
    EXPECT_EQ((std::vector<int>{config["vocab_size"], config["n_positions"], config["n_embd"], config["n_layer"],
                                config["n_head"]}),
              (std::vector<int>{c.vocab_size, c.seq_len, c.n_embd, c.n_layer, c.n_head}));
    EXPECT_EQ(config["activation_function"], "gelu_new");
    EXPECT_EQ(config["layer_norm_epsilon"], 1e-5);
    EXPECT_EQ(config["tie_word_embeddings"], true);
  }
  // The tokenizer: none for this byte-level run; given files are copied
  // when their vocabulary is the model's, and refused when it is not.
  EXPECT_NE(export_hf(ckpt, dir + "/hf").find("no tokenizer"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/hf/vocab.json"));
  {
    nlohmann::json v;
    for (int i = 0; i < c.vocab_size; ++i) v[fmt::format("t{}", i)] = i;
    std::ofstream(dir + "/encoder.json") << v.dump();
    std::ofstream(dir + "/vocab.bpe") << "#version: 0.2\nt 0\n";
    std::ofstream(dir + "/small.json") << R"({"a": 0, "b": 1})";
  }
  EXPECT_NE(export_hf(ckpt, dir + "/hf", dir + "/encoder.json", dir + "/vocab.bpe").find("tokenizer_config.json"),
            std::string::npos);
  auto bytes = [](const std::string& f) {
    std::ifstream i(f, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(i)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes(dir + "/hf/vocab.json"), bytes(dir + "/encoder.json"));
  EXPECT_EQ(bytes(dir + "/hf/merges.txt"), bytes(dir + "/vocab.bpe"));
  const auto tok = nlohmann::json::parse(std::ifstream(dir + "/hf/tokenizer_config.json"));
  EXPECT_EQ(tok["tokenizer_class"], "GPT2Tokenizer");
  EXPECT_EQ(tok["model_max_length"], c.seq_len);
  try {
    export_hf(ckpt, dir + "/hf2", dir + "/small.json", dir + "/vocab.bpe");
    ADD_FAILURE() << "a vocabulary of another size must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("small.json: 2 tokens, but the model's vocabulary is 256"), std::string::npos)
        << e.what();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A copy of a safetensors file as the Hugging Face hub stores GPT-2
// (GPT2Model's names: no "transformer." prefix), in dtype F32, BF16 or F16,
// with a causal-mask buffer the import must ignore.
void write_hub_style(const std::string& in, const std::string& out, const std::string& dtype) {
  std::ifstream f(in, std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string json(n, '\0');
  f.read(json.data(), std::streamsize(n));
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  nlohmann::ordered_json h = nlohmann::ordered_json::parse(json), o;
  std::string bytes;
  for (auto& [name, v] : h.items()) {
    if (name == "__metadata__") continue;
    const auto off = v["data_offsets"].get<std::vector<uint64_t>>();
    std::string t = data.substr(off[0], off[1] - off[0]);
    if (dtype == "BF16") {  // the upper halves: exact for values that are bf16 already, truncated otherwise
      std::string b(t.size() / 2, '\0');
      for (size_t i = 0; i < t.size() / 4; ++i) b.replace(2 * i, 2, t, 4 * i + 2, 2);
      t = b;
    } else if (dtype == "F16") {  // the compiler's own conversion: independent of the reader's
      std::string b(t.size() / 2, '\0');
      for (size_t i = 0; i < t.size() / 4; ++i) {
        float x;
        std::memcpy(&x, t.data() + 4 * i, 4);
        const _Float16 h = static_cast<_Float16>(x);
        std::memcpy(b.data() + 2 * i, &h, 2);
      }
      t = b;
    }
    o[name.substr(std::string("transformer.").size())] = {
        {"dtype", dtype}, {"shape", v["shape"]}, {"data_offsets", {bytes.size(), bytes.size() + t.size()}}};
    bytes += t;
  }
  o["h.0.attn.bias"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {bytes.size(), bytes.size() + 4}}};
  bytes.append(4, '\0');
  std::string hj = o.dump();
  hj.append((8 - hj.size() % 8) % 8, ' ');
  std::ofstream w(out, std::ios::binary);
  const uint64_t m = hj.size();
  w.write(reinterpret_cast<const char*>(&m), 8);
  w << hj << bytes;
}

// A sharded copy of a safetensors file, as save_pretrained writes a model
// over its max_shard_size: the tensors split over two files in DIR, with
// model.safetensors.index.json naming each tensor's file, and config.json.
// `overlap`: the second file holds one tensor of the first again.
void write_sharded(const std::string& hf_dir, const std::string& dir, bool overlap = false) {
  std::filesystem::create_directories(dir);
  std::ifstream f(hf_dir + "/model.safetensors", std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string json(n, '\0');
  f.read(json.data(), std::streamsize(n));
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const nlohmann::ordered_json h = nlohmann::ordered_json::parse(json);
  std::vector<std::string> names;
  for (const auto& [name, v] : h.items())
    if (name != "__metadata__") names.push_back(name);
  nlohmann::json index = {{"metadata", {{"total_size", data.size()}}}, {"weight_map", nlohmann::json::object()}};
  for (int part = 0; part < 2; ++part) {
    const std::string file = fmt::format("model-{:05d}-of-00002.safetensors", part + 1);
    const size_t lo = part == 0 ? 0 : names.size() / 2 - (overlap ? 1 : 0),
                 hi = part == 0 ? names.size() / 2 : names.size();
    nlohmann::ordered_json o;
    std::string bytes;
    for (size_t i = lo; i < hi; ++i) {
      const auto& v = h[names[i]];
      const auto off = v["data_offsets"].get<std::vector<uint64_t>>();
      o[names[i]] = {{"dtype", v["dtype"]}, {"shape", v["shape"]},
                     {"data_offsets", {bytes.size(), bytes.size() + off[1] - off[0]}}};
      bytes += data.substr(off[0], off[1] - off[0]);
      index["weight_map"][names[i]] = file;
    }
    std::string hj = o.dump();
    hj.append((8 - hj.size() % 8) % 8, ' ');
    std::ofstream w(dir + "/" + file, std::ios::binary);
    const uint64_t m = hj.size();
    w.write(reinterpret_cast<const char*>(&m), 8);
    w << hj << bytes;
  }
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump(1);
  std::filesystem::copy_file(hf_dir + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
}

// A run whose --init-from is refused with a DataError containing `what`.
void expect_init_refused(const RunConfig& c, const std::string& what) {
  SCOPED_TRACE(c.init_from);
  try {
    Trainer t(c, MPI_COMM_WORLD);
    t.run();
    ADD_FAILURE() << "refused: " << what;
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// --init-from: a run started from any export holds exactly those weights
// (lr 0: the one step changes nothing), each rank having read only its
// shard: llm.c, HDF5, the Hugging Face directory, and a hub-style
// safetensors file (no "transformer." prefix, an ignored mask buffer).
TEST(Checkpoint, InitFromLlmcOrHdf5Export) {
  const std::string dir = fresh_dir("initfrom");
  RunConfig a = eight_steps("zero3");
  a.steps = 2;
  a.ckpt_dir = dir;
  const RunResult r = train(a, MPI_COMM_WORLD);
  if (test::env().rank() == 0) {
    export_llmc(dir + "/step_00000002", dir + "/model.bin");
    export_hdf5(dir + "/step_00000002", dir + "/model.h5");
    export_hf(dir + "/step_00000002", dir + "/hf");
    write_hub_style(dir + "/hf/model.safetensors", dir + "/hub.safetensors", "F32");
    write_sharded(dir + "/hf", dir + "/sharded");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (std::string file : {"model.bin", "model.h5", "hf", "hub.safetensors", "sharded",
                           "sharded/model.safetensors.index.json"}) {
    for (bool self : {false, true}) {
      SCOPED_TRACE(file + (self ? " ddp on 1 rank" : " zero3 on the world"));
      RunConfig b = eight_steps(self ? "ddp" : "zero3");
      if (self) b.micro_batch = b.global_batch;
      b.steps = 1;
      b.lr = 0.f;
      b.min_lr = 0.f;
      b.init_from = dir + "/" + file;
      EXPECT_EQ(train(b, self ? MPI_COMM_SELF : MPI_COMM_WORLD).params, r.params);
    }
  }
  // bf16 and f16 tensors are widened: the run holds the file's values.
  // The init's weights (std 0.02) include f16 subnormals (below 6.1e-5).
  if (test::env().rank() == 0) {
    write_hub_style(dir + "/hf/model.safetensors", dir + "/hub_bf16.safetensors", "BF16");
    write_hub_style(dir + "/hf/model.safetensors", dir + "/hub_f16.safetensors", "F16");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (const std::string dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    RunConfig b = eight_steps("zero3");
    b.steps = 1;
    b.lr = b.min_lr = 0.f;
    b.init_from = dir + "/hub_" + dtype + ".safetensors";
    auto want = r.params;
    int subnormal = 0;
    for (auto& unit : want)
      for (float& x : unit) {
        if (dtype == "f16") {
          subnormal += x != 0.f && std::abs(x) < 6.103515625e-05f;
          x = static_cast<float>(static_cast<_Float16>(x));
          continue;
        }
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        bits &= 0xffff0000u;
        std::memcpy(&x, &bits, 4);
      }
    if (dtype == "f16") {
      EXPECT_GT(subnormal, 0) << "the test must cover f16 subnormals";
    }
    EXPECT_EQ(train(b, MPI_COMM_WORLD).params, want);
  }
  // The head count, which no tensor's shape gives, comes from config.json beside the file.
  RunConfig heads = eight_steps("zero3");
  heads.gpt.n_head = 2;
  heads.init_from = dir + "/hf";
  expect_init_refused(heads, "model mismatch: n_head = 4 in the file, 2 in this run");
  // A sharded model whose shard is missing, or whose shards both hold a tensor.
  if (test::env().rank() == 0) {
    write_sharded(dir + "/hf", dir + "/missing");
    std::filesystem::remove(dir + "/missing/model-00002-of-00002.safetensors");
    write_sharded(dir + "/hf", dir + "/twice", /*overlap=*/true);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  RunConfig missing = eight_steps("zero3");
  missing.init_from = dir + "/missing";
  expect_init_refused(missing, "missing/model-00002-of-00002.safetensors: cannot open: No such file or directory");
  RunConfig twice = eight_steps("zero3");
  twice.init_from = dir + "/twice";
  expect_init_refused(twice, "twice/model-00002-of-00002.safetensors: transformer.");
  RunConfig deeper = eight_steps("zero3");
  deeper.gpt.n_layer = 3;
  deeper.init_from = dir + "/hub.safetensors";
  expect_init_refused(deeper, "model mismatch: n_layer = 2 in the file, 3 in this run");
  RunConfig wide = eight_steps("zero3");
  wide.gpt.n_layer = 3;
  wide.init_from = dir + "/model.bin";
  try {
    Trainer t(wide, MPI_COMM_WORLD);
    t.run();
    ADD_FAILURE() << "a model mismatch must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("model mismatch: n_layer = 2 in the file, 3 in this run"), std::string::npos)
        << e.what();
  }
}

// --init-from one of our checkpoints (its directory or its state.h5): a new
// run from its parameters, each rank reading its own shard and checking the
// checksums. Its moments, step and data position are not taken: the run is
// the one started from the same parameters exported (ckpt_tool export),
// loss for loss and bit for bit, which it would not be with the checkpoint's
// non-zero moments, its step (AdamW's bias correction, the LR schedule) or
// its data position.
TEST(Checkpoint, InitFromACheckpointTakesItsParametersOnly) {
  const std::string dir = fresh_dir("initckpt");
  RunConfig a = eight_steps("zero3");
  a.steps = 2;
  a.ckpt_dir = dir;
  train(a, MPI_COMM_WORLD);
  const std::string ckpt = dir + "/step_00000002";
  if (test::env().rank() == 0) export_hdf5(ckpt, dir + "/model.h5");
  MPI_Barrier(MPI_COMM_WORLD);
  auto from = [&](const std::string& init, const std::string& strategy, bool self) {
    RunConfig b = eight_steps(strategy);
    b.steps = 3;
    if (self) b.micro_batch = b.global_batch;
    b.init_from = init;
    return train(b, self ? MPI_COMM_SELF : MPI_COMM_WORLD);
  };
  for (const auto& [strategy, self] : std::vector<std::pair<std::string, bool>>{
           {"zero3", false}, {"zero2", false}, {"ddp", true}}) {
    const RunResult want = from(dir + "/model.h5", strategy, self);
    for (const std::string& init : {ckpt, ckpt + "/state.h5"}) {
      SCOPED_TRACE(fmt::format("{} {}", init, self ? "ddp on 1 rank" : strategy + " on the world"));
      const RunResult got = from(init, strategy, self);
      EXPECT_EQ(got.losses, want.losses);
      EXPECT_EQ(got.params, want.params);
    }
  }
  auto refused = [&](const std::string& init, const std::string& what) {
    RunConfig c = eight_steps("zero3");
    c.init_from = init;
    expect_init_refused(c, what);
  };
  // The directory of checkpoints names its newest; a partial one is not taken.
  refused(dir, "a directory of checkpoints, not a checkpoint; the newest in it is " + ckpt);
  const std::string partial = dir + "/.partial-step_00000004";
  const std::string damaged = dir + "/damaged/step_00000002";
  if (test::env().rank() == 0) {
    fs::copy(ckpt, partial, fs::copy_options::recursive);
    fs::remove(partial + "/COMPLETE");
    // One flipped bit in a parameter's data.
    fs::create_directories(damaged);
    fs::copy(ckpt, damaged, fs::copy_options::recursive);
    flip_bit(damaged + "/state.h5", "/params/transformer.h.1.attn.c_proj.weight", 333, 0x04);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  refused(partial + "/state.h5", partial + ": not a complete checkpoint (no COMPLETE marker)");
  refused(damaged, damaged + "/state.h5: checksum mismatch in /params/transformer.h.1.attn.c_proj.weight");
}

// Publishing a checkpoint also removes the leftovers of writes that did not
// finish (.partial-*, of any step), and nothing else that is not a checkpoint.
TEST(Checkpoint, KeepLastPrunesOnlyOlderPublishedCheckpoints) {
  const std::string dir = fresh_dir("keep");
  if (test::env().rank() == 0) {
    for (const char* leftover : {"/.partial-step_00000001", "/.partial-step_00000009"}) {
      fs::create_directories(dir + leftover);
      std::ofstream(dir + leftover + "/state.h5") << "half a file";
    }
    fs::create_directories(dir + "/damaged-step_00000003");
    std::ofstream(dir + "/notes.txt") << "mine";
    // A user's copy of a checkpoint under another name is not one (it would sort after step_00000006).
    fs::create_directories(dir + "/step_00000006.bak");
    std::ofstream(dir + "/step_00000006.bak/COMPLETE") << "{}";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  RunConfig a = eight_steps("zero3");
  a.steps = 6;
  a.ckpt_dir = dir;
  a.ckpt_every = 2;
  a.keep_last = 2;
  train(a, MPI_COMM_WORLD);
  EXPECT_FALSE(fs::exists(dir + "/step_00000002"));
  EXPECT_TRUE(fs::exists(dir + "/step_00000004/COMPLETE"));
  EXPECT_TRUE(fs::exists(dir + "/step_00000006/COMPLETE"));
  EXPECT_EQ(latest_checkpoint(dir), dir + "/step_00000006");
  EXPECT_FALSE(fs::exists(dir + "/.partial-step_00000001"));
  EXPECT_FALSE(fs::exists(dir + "/.partial-step_00000009"));
  EXPECT_TRUE(fs::exists(dir + "/damaged-step_00000003"));
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  EXPECT_TRUE(fs::exists(dir + "/step_00000006.bak/COMPLETE"));
  EXPECT_EQ(checkpoint_step("step_00000006.bak"), -1);
  EXPECT_EQ(checkpoint_step("step_123456789"), 123456789);  // past 8 digits, names grow
  EXPECT_EQ(checkpoint_step("step_0000006"), -1);
}

}  // namespace
}  // namespace gpt

namespace gpt {
namespace {

// Across launches of different sizes (ctest fixtures): GPT_XWORLD_DIR names
// the directory. GPT_XWORLD_MODE=save: zero3 on this world, checkpoint at
// step 4, and the uninterrupted losses of steps 5..8 in want.json. =load:
// resume it under GPT_XWORLD_STRATEGY (and GPT_XWORLD_MESH) on this world.
// A global batch of 24 divides every world size used (1, 2, 3, 4, 8).
RunConfig xworld_run(const std::string& strategy) {
  RunConfig c = eight_steps(strategy);
  c.global_batch = 24;
  c.micro_batch = 24 / test::env().size();
  return c;
}

TEST(CheckpointAcrossWorlds, SaveOrLoad) {
  const char* dir = std::getenv("GPT_XWORLD_DIR");
  const char* mode = std::getenv("GPT_XWORLD_MODE");
  if (!dir || !mode) GTEST_SKIP() << "set GPT_XWORLD_DIR and GPT_XWORLD_MODE (ctest does)";
  if (std::string(mode) == "save") {
    if (test::env().rank() == 0) fs::remove_all(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    RunConfig a = xworld_run("zero3");
    a.ckpt_dir = dir;
    a.ckpt_every = 4;
    const RunResult r = train(a, MPI_COMM_WORLD);
    if (test::env().rank() == 0)
      std::ofstream(std::string(dir) + "/want.json") << nlohmann::json(std::vector<double>(r.losses.begin() + 4, r.losses.end())).dump();
    return;
  }
  const char* strategy = std::getenv("GPT_XWORLD_STRATEGY");
  const char* mesh = std::getenv("GPT_XWORLD_MESH");
  RunConfig b = xworld_run(strategy ? strategy : "ddp");
  b.mesh = mesh ? mesh : "";
  b.resume = std::string(dir) + "/step_00000004";
  std::ifstream f(std::string(dir) + "/want.json");
  const auto want = nlohmann::json::parse(f).get<std::vector<double>>();
  expect_close(train(b, MPI_COMM_WORLD).losses, want,
               fmt::format("zero3@4 -> {}{}@{}", b.strategy, b.mesh.empty() ? "" : " " + b.mesh, test::env().size()));
}

}  // namespace
}  // namespace gpt
