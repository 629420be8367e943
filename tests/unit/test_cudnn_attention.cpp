// cuDNN's fused attention graphs (model/cuda/attention_cudnn.hpp) without a
// GPU, for an H100, an A100 and a B200 described by cuDNN's device-properties JSON
// (the fields cuDNN 9.19 asks for), at gpt2-124m's training shape and small
// ones. cuDNN's heuristics must offer engine configurations that pass their
// support checks (a graph the fused-attention engines do not recognise, an
// operation out of place, a wrong type or layout, gets none), and the plan
// chosen as on that GPU must finalize: cuDNN generates and compiles its
// kernel and hands it to the driver library to load. It must be the GPU's
// own flash-attention kernel (sm90 on the H100, sm80 on the A100, sm100 on the B200), and its
// workspace what the planner counts (attention_ds.hpp). What the kernels
// compute is checked against the CPU reference on a GPU
// (tests/gpu/test_cuda_ops.cpp, CudnnAttention*).
//
// CMake puts a directory on this test's LD_LIBRARY_PATH whose libcuda.so.1
// is tests/unit/fake_libcuda: the toolkit stub's entry points, except that
// it accepts cuDNN's compiled kernels and records their names. Skipped, with
// the reason, without cuDNN 9.8+ or that library.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "model/attention_ds.hpp"
#include "model/config.hpp"
#include "model/cuda/attention_cudnn.hpp"

namespace {

using gpt::cuda::AttentionShape;

// cuDNN's device-properties JSON (the fields cuDNN 9.19 asks for) of a GPU:
// what differs between the GPUs below, the rest common to sm_80 and later.
struct Gpu {
  const char* name;
  int sm;                          // smVersion: 80, 90, 100
  int sms;                         // multiprocessors
  int smem_optin;                  // bytes of shared memory a block may opt into
  int pci_id, sm_khz, mem_khz;
  int64_t l2, memory;              // bytes
};
std::string device_json(const Gpu& g) {
  const std::string n = std::to_string(g.sm);
  return R"({"maxGridSize": [2147483647, 65535, 65535], "maxBlockSize": [1024, 1024, 64], "regsPerBlock": 65536,
  "warpSize": 32, "maxSharedMemoryPerBlock": 49152, "reservedSharedMemoryPerBlock": 1024, "maxRegistersPerSM": 65536,
  "maxCtasPerSM": 32, "maxThreadsPerBlock": 1024, "maxThreadsPerSM": 2048, "isTccDriver": 0, "supportCoopLaunch": 1,
  "cudaDeviceId": 0, "driverVer": 13000, "multiProcessorCount": )" +
         std::to_string(g.sms) + R"(, "maxSharedMemoryPerBlockOptin": )" + std::to_string(g.smem_optin) +
         R"(, "pciDeviceId": )" + std::to_string(g.pci_id) + R"(, "smClockRateKHz": )" + std::to_string(g.sm_khz) +
         R"(, "memClockRateKHz": )" + std::to_string(g.mem_khz) + R"(, "l2CacheSize": )" + std::to_string(g.l2) +
         R"(, "deviceName": ")" + g.name + R"(", "smVersion": )" + n + R"(, "deviceVer": )" + n + "0" +
         R"(, "totalGlobalMem": )" + std::to_string(g.memory) + "}";
}
// An H100 SXM, an A100 SXM and a B200 (the B200's as published: 148 SMs, 227 KiB a block, 126.5 MiB of L2).
const std::string kH100 =
    device_json({"NVIDIA H100 80GB HBM3", 90, 132, 232448, 8992, 1980000, 2619000, 52428800, 85520809984});
const std::string kA100 =
    device_json({"NVIDIA A100-SXM4-80GB", 80, 108, 166912, 8370, 1410000, 1593000, 41943040, 85198045184});
const std::string kB200 =
    device_json({"NVIDIA B200", 100, 148, 232448, 10497, 1965000, 3996000, 132644864, 191537709056});

// Why these tests cannot run here, or "" when they can.
std::string unavailable() {
  const std::string why = gpt::cuda::cudnn_attention_unavailable();
  if (!why.empty()) return why;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) return "no libcuda.so.1 to load";
  if (!dlsym(driver, "gpt_fake_libcuda_kernel")) return "libcuda.so.1 is not tests/unit/fake_libcuda";
  return "";
}

#define SKIP_UNLESS_AVAILABLE()              \
  do {                                       \
    const std::string why_ = unavailable();  \
    if (!why_.empty()) GTEST_SKIP() << why_; \
  } while (0)

// The last kernel cuDNN asked the (fake) driver for: the chosen plan's.
std::string last_kernel() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  auto count = reinterpret_cast<int (*)()>(dlsym(driver, "gpt_fake_libcuda_kernel_count"));
  auto name = reinterpret_cast<const char* (*)(int)>(dlsym(driver, "gpt_fake_libcuda_kernel"));
  return count && name ? name(count() - 1) : "";
}

struct Planned {
  gpt::cuda::CudnnAttentionPlan plan;
  std::string kernel;
};

// One direction's plan at s on the device `json` describes, with its kernel.
Planned plan(const AttentionShape& s, bool backward, const std::string& json, const char* device) {
  Planned p{gpt::cuda::cudnn_attention_plan(s, backward, json), ""};
  if (p.plan.chosen >= 0) p.kernel = last_kernel();
  std::printf("%s %s B=%lld T=%lld C=%lld heads=%lld: %lld configurations, plan %lld, workspace %lld bytes, %s\n",
              device, backward ? "backward" : "forward", (long long)s.B, (long long)s.T, (long long)s.C,
              (long long)s.NH, (long long)p.plan.configs, (long long)p.plan.chosen, (long long)p.plan.engine_workspace,
              p.kernel.c_str());
  EXPECT_GE(p.plan.configs, 1) << device;
  EXPECT_GE(p.plan.chosen, 0) << device << ": " << p.plan.why;
  return p;
}

TEST(CudnnAttention, Gpt2ShapePlansTheFlashKernelsOfH100A100AndB200) {
  SKIP_UNLESS_AVAILABLE();
  const std::string lib = gpt::cuda::cudnn_attention_library();  // for the record: "cuDNN 9.x.y (file)"
  EXPECT_EQ(lib.rfind("cuDNN 9.", 0), 0u) << lib;
  EXPECT_NE(lib.find("libcudnn.so.9"), std::string::npos) << lib;
  std::printf("%s\n", lib.c_str());
  const AttentionShape s{16, 1024, 768, 12};
  const int64_t engine = gpt::attention_cudnn_engine_bytes(s.B, s.T, s.NH);
  for (const bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    const Planned h100 = plan(s, backward, kH100, "H100"), a100 = plan(s, backward, kA100, "A100"),
                  b200 = plan(s, backward, kB200, "B200");
    // Each GPU's own generation of cuDNN's flash attention (wgmma on the H100).
    EXPECT_NE(h100.kernel.find("sm90"), std::string::npos) << h100.kernel;
    EXPECT_NE(h100.kernel.find("flash"), std::string::npos) << h100.kernel;
    EXPECT_NE(a100.kernel.find("sm80"), std::string::npos) << a100.kernel;
    EXPECT_NE(a100.kernel.find("flash"), std::string::npos) << a100.kernel;
    EXPECT_NE(b200.kernel.find("sm100"), std::string::npos) << b200.kernel;
    EXPECT_NE(b200.kernel.find("flash"), std::string::npos) << b200.kernel;
    // The planner counts the H100's larger direction, which covers the B200's (its backward: the softmax sums
    // and 128 bytes); the A100's backward asks for a dQ accumulator's size more.
    EXPECT_LE(h100.plan.engine_workspace, engine);
    EXPECT_LE(b200.plan.engine_workspace, engine);
    if (backward) {
      EXPECT_EQ(h100.plan.engine_workspace, engine);
      EXPECT_GE(b200.plan.engine_workspace, engine - gpt::kAttentionCudnnAlign);
      const int64_t accum = 4 * s.B * s.T * s.C;
      EXPECT_GE(a100.plan.engine_workspace, engine + accum - gpt::kAttentionCudnnAlign);
      EXPECT_LE(a100.plan.engine_workspace, engine + accum);
    }
  }
}

TEST(CudnnAttention, SmallShapesPlanOnH100) {
  SKIP_UNLESS_AVAILABLE();
  // tiny (head size 32), an odd length with head size 64, and head size 128: small, and gpt2-124m's width in 6
  // heads; head sizes 96 (gpt2-124m's width in 8 heads) and 80; and shapes whose softmax sums (4 B NH T bytes)
  // are not a multiple of 256 bytes: cuDNN's ask aligns them to 128 (1600 -> 1664 bytes, + 256), the
  // backend's allocation rounds that up to 256 (attention_cudnn_backward_workspace), which the planner counts.
  for (const AttentionShape& s :
       {AttentionShape{2, 64, 128, 4}, AttentionShape{3, 100, 256, 4}, AttentionShape{2, 64, 256, 2},
        AttentionShape{4, 1024, 768, 6}, AttentionShape{4, 1024, 768, 8}, AttentionShape{2, 100, 160, 2},
        AttentionShape{1, 72, 80, 1}, AttentionShape{3, 72, 128, 4}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) + " NH=" + std::to_string(s.NH));
    const Planned forward = plan(s, false, kH100, "H100"), backward = plan(s, true, kH100, "H100");
    EXPECT_NE(forward.kernel.find("sm90"), std::string::npos) << forward.kernel;
    EXPECT_NE(backward.kernel.find("sm90"), std::string::npos) << backward.kernel;
    const int64_t sums = 4 * s.B * s.NH * s.T;
    EXPECT_LE(forward.plan.engine_workspace, gpt::attention_cudnn_engine_bytes(s.B, s.T, s.NH));
    EXPECT_EQ(backward.plan.engine_workspace, (sums + 127) / 128 * 128 + gpt::kAttentionCudnnAlign);
    EXPECT_EQ(gpt::attention_cudnn_aligned(backward.plan.engine_workspace),
              gpt::attention_cudnn_engine_bytes(s.B, s.T, s.NH));
  }
}

// Every model preset at its full context (B=4) plans cuDNN's sm90 kernels on an H100, with the planner's
// workspace: so `--attention auto` would run cuDNN for each of them there. On a B200 the GPT-2 presets plan
// its sm100 kernels within the planner's count (the backward 128 bytes under it); `tiny` (head size 32,
// T=128) gets its sm80 kernels, whose backward asks for more, as an A100's does.
TEST(CudnnAttention, EveryPresetPlansOnH100AndB200) {
  SKIP_UNLESS_AVAILABLE();
  for (const std::string& name : gpt::preset_names()) {
    SCOPED_TRACE(name);
    const gpt::GPTConfig c = gpt::preset(name);
    const AttentionShape s{4, c.seq_len, c.n_embd, c.n_head};
    for (const bool backward : {false, true}) {
      const int64_t count = backward ? gpt::attention_cudnn_engine_bytes(s.B, s.T, s.NH)
                                     : gpt::attention_cudnn_forward_engine_bytes();  // an evaluation's, planned
      const Planned p = plan(s, backward, kH100, "H100");
      EXPECT_NE(p.kernel.find("sm90"), std::string::npos) << p.kernel;
      EXPECT_EQ(p.plan.engine_workspace, count);
      const Planned b = plan(s, backward, kB200, "B200");
      if (name == "tiny") {
        EXPECT_NE(b.kernel.find("sm80"), std::string::npos) << b.kernel;
      } else {
        EXPECT_NE(b.kernel.find("sm100"), std::string::npos) << b.kernel;
        EXPECT_LE(b.plan.engine_workspace, count);
        EXPECT_GE(b.plan.engine_workspace, count - gpt::kAttentionCudnnAlign);
      }
    }
  }
}

TEST(CudnnAttention, UnsupportedHeadSizeAndBadDeviceAreErrors) {
  SKIP_UNLESS_AVAILABLE();
  EXPECT_FALSE(gpt::cuda::cudnn_attention_supported({2, 64, 120, 4}));   // head size 30
  EXPECT_FALSE(gpt::cuda::cudnn_attention_supported({2, 64, 1024, 4}));  // 256
  EXPECT_TRUE(gpt::cuda::cudnn_attention_supported({2, 64, 768, 12}));
  try {
    gpt::cuda::cudnn_attention_plan({2, 64, 120, 4}, false, kH100);
    ADD_FAILURE() << "head size 30 accepted";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("head size 30"), std::string::npos) << e.what();
  }
  // A device description cuDNN cannot read: its reason, naming the missing field.
  try {
    gpt::cuda::cudnn_attention_plan({2, 64, 128, 4}, true, "{}");
    ADD_FAILURE() << "an empty device description accepted";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("maxGridSize"), std::string::npos) << e.what();
  }
}

}  // namespace
