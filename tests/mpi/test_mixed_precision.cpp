// The mixed-precision engine on an emulated bf16 device (emulated_bf16.hpp):
// bf16 compute copies and gradients, fp32 master weights sharded with the
// optimizer state, gradients widened to fp32 (or reduced in bf16) before
// each collective, fp32 gradient-shard accumulators. Launched on 2 and 4
// ranks: every strategy, with both reduce dtypes, against 1 rank of the same
// emulated device on the same global batch, and that against fp32. Also:
// where zero1/zero2 wait for their post-step all-gathers on a device arena
// (the next forward) and on the host (the step), read from a --trace.
//
// Tolerances. Against 1 bf16 rank: the ranks' partial gradients are rounded
// to bf16 before they are summed (one rank rounds the sum), a relative
// error of ~2^-9 per element that 10 AdamW steps carry into the losses at
// ~1e-3; 1e-2 leaves margin. Gradient norms are compared too: Adam hides
// a gradient scaled by a constant, the norm does not — a double-counted or
// missing rank moves it by a factor. Against fp32: 3% (test_cuda_model.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "emulated_bf16.hpp"
#include "fixtures.hpp"
#include "mpi_test_env.hpp"
#include "trace_reader.hpp"
#include "model/layout.hpp"
#include "strategies/trainer.hpp"
#include "strategies/unit_model.hpp"

namespace gpt {
namespace {

TrainSummary train(RunConfig c, MPI_Comm comm, bool bf16) {
  MemoryTracker device_mem;
  if (!bf16) return Trainer(c, comm).run();
  c.precision = Precision::kBf16;
  Trainer t(c, comm, test::make_emulated_bf16_backend(&device_mem));
  return t.run();
}

const TrainSummary& reference(bool bf16) {
  static std::optional<TrainSummary> ref[2];
  if (!ref[bf16]) {
    RunConfig c = test::small_run();
    c.micro_batch = c.global_batch;
    ref[bf16] = train(c, MPI_COMM_SELF, bf16);
  }
  return *ref[bf16];
}

void expect_close(const TrainSummary& got, const TrainSummary& want, double tol, const std::string& what) {
  ASSERT_EQ(got.losses.size(), want.losses.size()) << what;
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_NEAR(got.losses[s], want.losses[s], tol * want.losses[s]) << what << ": loss at step " << s + 1;
    EXPECT_NEAR(got.grad_norms[s], want.grad_norms[s], tol * want.grad_norms[s]) << what << ": norm at step " << s + 1;
  }
}

TEST(MixedPrecision, EmulatedBf16FollowsFp32) {
  expect_close(reference(true), reference(false), 0.03, "1-rank bf16 vs fp32");
  EXPECT_NE(reference(true).losses.back(), reference(false).losses.back()) << "bf16 rounding must show";
}

TEST(MixedPrecision, EveryStrategyEqualsOneRank) {
  const int world = test::env().size();
  for (const char* reduce : {"fp32", "bf16"}) {
    for (const char* s : {"ddp", "zero1", "zero2", "zero3", "hybrid"}) {
      RunConfig c = test::small_run();
      c.strategy = s;
      c.reduce_dtype = reduce;
      if (c.strategy == "hybrid") c.mesh = fmt::format("2x{}", world / 2);
      expect_close(train(c, MPI_COMM_WORLD, true), reference(true), 1e-2,
                   fmt::format("{} on {} ranks, reduce {}", s, world, reduce));
    }
  }
}

// Where zero1's and zero2's post-step parameter all-gathers are waited for
// (the MPI communicator puts a "wait all_gather" slice wherever the caller
// waits for one, of no length when it is already complete). On a device
// arena, each unit's is waited for by its next use: in the next step's
// forward, before the head's loss, so the gathers overlap the forward of
// the units before it, and the last step's by the end of the run. On the
// host, inside the optimizer step that issued them (data_parallel.cpp says
// why). Timing-independent: waits are recorded whether or not they block.
TEST(MixedPrecision, DeviceArenasWaitForEachUnitsGatherWhereItIsUsed) {
  const int W = test::env().size();
  const size_t units = ParamLayout(test::small_run().gpt).num_units();
  for (const char* strategy : {"zero1", "zero2"}) {
    for (const bool device : {true, false}) {
      SCOPED_TRACE(fmt::format("{} on the {}", strategy, device ? "emulated device" : "host"));
      RunConfig c = test::small_run();
      c.steps = 3;
      c.strategy = strategy;
      c.trace = fmt::format("{}/trace_gathers_{}_{}_np{}.json", test::data_dir(), strategy, device, W);
      train(c, MPI_COMM_WORLD, device);
      if (test::env().rank() != 0) continue;
      const test::ParsedTrace t = test::read_trace(c.trace);
      const std::vector<test::Slice> waits = t.named(0, "wait all_gather"), steps = t.named(0, "step.*"),
                                     heads = t.named(0, "head and loss"), updates = t.named(0, "optimizer step");
      ASSERT_EQ(steps.size(), size_t(c.steps));
      ASSERT_EQ(heads.size(), size_t(c.steps));
      ASSERT_EQ(updates.size(), size_t(c.steps));
      if (W == 1) {  // a one-rank group shards nothing and gathers nothing
        EXPECT_TRUE(waits.empty());
        continue;
      }
      // The initial values end with the same gathers as a step (each rank computes its shard's):
      // one wait per unit more.
      ASSERT_EQ(waits.size(), units * size_t(c.steps + 1)) << "one wait per unit and step, and for the initial values";
      const auto within = [&](double b, double e) {
        int n = 0;
        for (const test::Slice& w : waits) n += b <= w.b && w.e <= e;
        return n;
      };
      const std::vector<test::Slice> init = t.named(0, "initial values");
      ASSERT_EQ(init.size(), 1u);
      if (device)  // waited for by the first step's forward
        EXPECT_EQ(within(steps[0].b, heads[0].b), int(units)) << "the initial values' gathers";
      else
        EXPECT_EQ(within(init[0].b, init[0].e), int(units)) << "the host ends the initial values' gathers with them";
      for (int k = 0; k < c.steps; ++k) {
        const int in_update = within(updates[size_t(k)].b, updates[size_t(k)].e);
        if (!device) {
          EXPECT_EQ(in_update, int(units)) << "step " << k + 1 << ": the host ends its gathers with the step";
          continue;
        }
        EXPECT_EQ(in_update, 0) << "step " << k + 1 << ": a device waits for no gather in the optimizer step";
        if (k + 1 < c.steps)  // waited for in the next step's forward
          EXPECT_EQ(within(steps[size_t(k) + 1].b, heads[size_t(k) + 1].b), int(units)) << "step " << k + 2;
        else  // by the end of the run
          EXPECT_EQ(within(steps[size_t(k)].e, 1e300), int(units)) << "after the last step";
      }
    }
  }
}

// Checkpoints hold the fp32 master weights and moments (staged to host
// memory by the device arena): a bf16 run resumed under the same strategy
// repeats the uninterrupted run exactly (the bf16 compute copy is re-derived
// from the master), and the same checkpoint resumes on the CPU in fp32.
TEST(MixedPrecision, CheckpointRoundTrip) {
  namespace fs = std::filesystem;
  const std::string dir = (fs::temp_directory_path() / "gpt_mixed_precision_ckpt").string();
  if (test::env().rank() == 0) fs::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  RunConfig c = test::small_run();
  c.steps = 8;
  c.strategy = "zero3";
  c.ckpt_dir = dir;
  c.ckpt_every = 4;
  const TrainSummary full = train(c, MPI_COMM_WORLD, true);
  RunConfig r = c;
  r.ckpt_dir = dir + "_resumed";
  if (test::env().rank() == 0) fs::remove_all(r.ckpt_dir);
  r.resume = dir + "/step_00000004";
  const TrainSummary resumed = train(r, MPI_COMM_WORLD, true);
  ASSERT_EQ(resumed.losses.size(), 4u);
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(resumed.losses[s], full.losses[4 + s]) << "step " << 5 + s;
  r.strategy = "ddp";
  const TrainSummary on_cpu = train(r, MPI_COMM_WORLD, false);
  ASSERT_EQ(on_cpu.losses.size(), 4u);
  for (size_t s = 0; s < 4; ++s) EXPECT_NEAR(on_cpu.losses[s], full.losses[4 + s], 0.03 * full.losses[4 + s]);
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::env().rank() == 0) {
    fs::remove_all(dir);
    fs::remove_all(r.ckpt_dir);
  }
}

}  // namespace
}  // namespace gpt
