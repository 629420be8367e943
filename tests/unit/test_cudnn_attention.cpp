// cuDNN's fused attention graphs (model/cuda/attention_cudnn.hpp) without a
// GPU: cuDNN's heuristics, given a device described by its device-properties
// JSON (an H100 and an A100 below, the fields cuDNN 9.19 asks for), must
// offer at least one engine configuration that passes its support checks
// for the forward and the backward graph, at gpt2-124m's training shape and
// at a small one. A graph the fused-attention engines do not recognise (an
// operation out of place, a wrong type or layout) gets none, so this checks
// the graphs' structure; what they compute is checked against the CPU
// reference on a GPU (tests/gpu/test_cuda_ops.cpp, CudnnAttention*).
//
// The support checks load the driver library to set up cuDNN's runtime
// compiler; CMake points LD_LIBRARY_PATH at a directory holding the CUDA
// toolkit's stub as libcuda.so.1 (it answers every driver call with "stub
// library", but loading is all the checks need). Skipped, with the reason,
// without cuDNN 9.8+ or the stub.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "model/cuda/attention_cudnn.hpp"

namespace {

using gpt::cuda::AttentionShape;
using gpt::cuda::cudnn_attention_support;

// cuDNN's device-properties JSON for an H100 SXM (sm_90) and an A100 SXM (sm_80).
const std::string kH100 = R"({"maxGridSize": [2147483647, 65535, 65535], "maxBlockSize": [1024, 1024, 64],
  "regsPerBlock": 65536, "multiProcessorCount": 132, "warpSize": 32, "maxSharedMemoryPerBlock": 49152,
  "maxSharedMemoryPerBlockOptin": 232448, "reservedSharedMemoryPerBlock": 1024, "maxRegistersPerSM": 65536,
  "maxCtasPerSM": 32, "maxThreadsPerBlock": 1024, "maxThreadsPerSM": 2048, "pciDeviceId": 8992, "isTccDriver": 0,
  "supportCoopLaunch": 1, "smClockRateKHz": 1980000, "memClockRateKHz": 2619000, "l2CacheSize": 52428800,
  "deviceName": "NVIDIA H100 80GB HBM3", "smVersion": 90, "totalGlobalMem": 85520809984, "cudaDeviceId": 0,
  "deviceVer": 900, "driverVer": 13000})";
const std::string kA100 = R"({"maxGridSize": [2147483647, 65535, 65535], "maxBlockSize": [1024, 1024, 64],
  "regsPerBlock": 65536, "multiProcessorCount": 108, "warpSize": 32, "maxSharedMemoryPerBlock": 49152,
  "maxSharedMemoryPerBlockOptin": 166912, "reservedSharedMemoryPerBlock": 1024, "maxRegistersPerSM": 65536,
  "maxCtasPerSM": 32, "maxThreadsPerBlock": 1024, "maxThreadsPerSM": 2048, "pciDeviceId": 8370, "isTccDriver": 0,
  "supportCoopLaunch": 1, "smClockRateKHz": 1410000, "memClockRateKHz": 1593000, "l2CacheSize": 41943040,
  "deviceName": "NVIDIA A100-SXM4-80GB", "smVersion": 80, "totalGlobalMem": 85198045184, "cudaDeviceId": 0,
  "deviceVer": 800, "driverVer": 13000})";

// Why these tests cannot run here, or "" when they can.
std::string unavailable() {
  const std::string why = gpt::cuda::cudnn_attention_unavailable();
  if (!why.empty()) return why;
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) return "no libcuda.so.1 (driver or stub) to load";
  return "";
}

#define SKIP_UNLESS_AVAILABLE()                           \
  do {                                                    \
    const std::string why_ = unavailable();               \
    if (!why_.empty()) GTEST_SKIP() << why_;              \
  } while (0)

TEST(CudnnAttention, Gpt2ShapeHasEnginesOnH100AndA100) {
  SKIP_UNLESS_AVAILABLE();
  const std::string lib = gpt::cuda::cudnn_attention_library();  // for the record: "cuDNN 9.x.y (file)"
  EXPECT_EQ(lib.rfind("cuDNN 9.", 0), 0u) << lib;
  EXPECT_NE(lib.find("libcudnn.so.9"), std::string::npos) << lib;
  const AttentionShape s{16, 1024, 768, 12};
  for (const std::string* dev : {&kH100, &kA100}) {
    const auto n = cudnn_attention_support(s, *dev);
    std::printf("%s, %s: %lld forward and %lld backward engine configurations\n", lib.c_str(),
                dev == &kH100 ? "H100" : "A100", (long long)n.forward_configs, (long long)n.backward_configs);
    EXPECT_GE(n.forward_configs, 1) << (dev == &kH100 ? "H100" : "A100");
    EXPECT_GE(n.backward_configs, 1) << (dev == &kH100 ? "H100" : "A100");
  }
}

TEST(CudnnAttention, SmallShapesHaveEngines) {
  SKIP_UNLESS_AVAILABLE();
  // tiny (head size 32), and an odd length with head size 64.
  for (const AttentionShape& s : {AttentionShape{2, 64, 128, 4}, AttentionShape{3, 100, 256, 4}}) {
    const auto n = cudnn_attention_support(s, kH100);
    EXPECT_GE(n.forward_configs, 1) << "T=" << s.T << " C=" << s.C;
    EXPECT_GE(n.backward_configs, 1) << "T=" << s.T << " C=" << s.C;
  }
}

TEST(CudnnAttention, UnsupportedHeadSizeAndBadDeviceAreErrors) {
  SKIP_UNLESS_AVAILABLE();
  EXPECT_FALSE(gpt::cuda::cudnn_attention_supported({2, 64, 120, 4}));  // head size 30
  EXPECT_FALSE(gpt::cuda::cudnn_attention_supported({2, 64, 1024, 4}));  // 256
  EXPECT_TRUE(gpt::cuda::cudnn_attention_supported({2, 64, 768, 12}));
  try {
    cudnn_attention_support({2, 64, 120, 4}, kH100);
    ADD_FAILURE() << "head size 30 accepted";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("head size 30"), std::string::npos) << e.what();
  }
  // A device description cuDNN cannot read: its reason, naming the missing field.
  try {
    cudnn_attention_support({2, 64, 128, 4}, "{}");
    ADD_FAILURE() << "an empty device description accepted";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("maxGridSize"), std::string::npos) << e.what();
  }
}

}  // namespace
