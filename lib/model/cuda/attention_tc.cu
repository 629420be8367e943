// Launchers of the tensor-core attention kernels (attention_tc_kernels.cuh).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "model/attention_ds.hpp"
#include "model/cuda/attention_tc.hpp"
#include "model/cuda/attention_tc_kernels.cuh"
#include "model/cuda/check.hpp"
#include "model/cuda/launch.cuh"

namespace gpt::cuda::detail {
namespace {

using namespace tc;

// Launches kKernel with smem bytes of dynamic shared memory. Above the 48
// KiB a launch gets by default the kernel must opt in; it does so once (a
// process drives one device), so launches add no host call.
template <auto kKernel, typename... Args>
void launch(int smem, dim3 grid, cudaStream_t stream, Args... args) {
  if (smem > 48 * 1024) {
    static const bool opted_in = [smem] {
      GPT_CUDA_OK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kKernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      return true;
    }();
    (void)opted_in;
  }
  launch_kernel(kKernel, grid, kThreads, size_t(smem), stream, args...);
}

template <int HS>
void forward_hs(bf16* out, float* lse, const bf16* qkv, const AttentionShape& s, cudaStream_t stream, bool wide) {
  const float scale = 1.f / sqrtf(float(HS));
  // The wide forward's two m-tiles per warp would not fit the registers at head size 128; a benchmark
  // variant, compiled at 32 and 64 only (attention.cu refuses it at the others).
  if constexpr (HS == 32 || HS == 64)
    if (wide)
      return launch<forward_wide_kernel<HS>>(forward_wide_smem<HS>(), wide_grid(s.B, s.T, s.NH), stream, out, lse,
                                             qkv, int(s.T), int(s.C), int(s.NH), scale);
  launch<forward_kernel<HS>>(forward_smem<HS>(), tile_grid(s.B, s.T, s.NH), stream, out, lse, qkv, int(s.T),
                             int(s.C), int(s.NH), scale);
}

// The fewest buffers of the backward's streamed tiles compiled at head size
// HS: at 128, where the double-buffered blocks take 103 KiB, also single
// buffers (69 KiB), for GPUs that give a block 99 KiB (8.6, 8.9, 12.0).
template <int HS>
constexpr int kFewestBufs = HS == 128 ? 1 : 2;

template <int HS, int kBufs>
void backward_bufs(bf16* dqkv, const float* delta, const bf16* dout, const bf16* qkv, const float* lse,
                   const AttentionShape& s, cudaStream_t stream, bf16* ds, int64_t ds_pairs) {
  const float scale = 1.f / sqrtf(float(HS));
  const int T = int(s.T), C = int(s.C), NH = int(s.NH);
  if (ds_pairs <= 0) {
    const dim3 grid = tile_grid(s.B, s.T, s.NH);
    launch<dkv_kernel<HS, false, kBufs>>(dkv_smem<HS, kBufs>(), grid, stream, dqkv, dout, qkv, lse, delta, T, C,
                                         NH, scale, static_cast<bf16*>(nullptr), 0);
    launch<dq_kernel<HS, kBufs>>(dq_smem<HS, kBufs>(), grid, stream, dqkv, dout, qkv, lse, delta, T, C, NH, scale);
    return;
  }
  // The pairs in as few chunks as fit the stored dS, of equal size
  // (attention_ds_launches). Each chunk's dQ launch reads what its dK/dV
  // launch wrote (same stream); the next chunk's dK/dV launch overwrites it
  // only after.
  const int64_t pairs = s.B * s.NH, per_launch = attention_ds_launches(pairs, ds_pairs).pairs;
  for (int64_t bh0 = 0; bh0 < pairs; bh0 += per_launch) {
    const dim3 grid = tile_grid_pairs(s.T, std::min(per_launch, pairs - bh0));
    launch<dkv_kernel<HS, true, kBufs>>(dkv_smem<HS, kBufs>(), grid, stream, dqkv, dout, qkv, lse, delta, T, C, NH,
                                        scale, ds, int(bh0));
    launch<dq_from_ds_kernel<HS>>(dq_from_ds_smem<HS>(), grid, stream, dqkv, static_cast<const bf16*>(ds), qkv, T, C,
                                  NH, scale, int(bh0));
  }
}

bool g_force_single_buffers = false;  // attention_force_single_buffers

// Double buffers where the device gives a block their memory (smem_optin
// bytes), else single ones where compiled. attention_tensor_core_ok has
// held the device to tensor_core_smem (the fewest buffers' need).
template <int HS>
void backward_hs(bf16* dqkv, const float* delta, const bf16* dout, const bf16* qkv, const float* lse,
                 const AttentionShape& s, cudaStream_t stream, bf16* ds, int64_t ds_pairs, int smem_optin) {
  if constexpr (kFewestBufs<HS> == 1)
    if (g_force_single_buffers || std::max(dkv_smem<HS, 2>(), dq_smem<HS, 2>()) > smem_optin)
      return backward_bufs<HS, 1>(dqkv, delta, dout, qkv, lse, s, stream, ds, ds_pairs);
  backward_bufs<HS, 2>(dqkv, delta, dout, qkv, lse, s, stream, ds, ds_pairs);
}

}  // namespace

// The largest of the kernels' blocks at head size HS, with the backward's
// fewest buffers: what a block must be given for them to run (the wide
// forward is compiled at 32 and 64 only).
template <int HS>
constexpr int tensor_core_smem() {
  constexpr int kBufs = kFewestBufs<HS>;
  int most = std::max({forward_smem<HS>(), dkv_smem<HS, kBufs>(), dq_smem<HS, kBufs>(), dq_from_ds_smem<HS>()});
  if constexpr (HS == 32 || HS == 64) most = std::max(most, forward_wide_smem<HS>());
  return most;
}

bool attention_has_single_buffers(int64_t hs) {
  bool has = false;
  with_head_size(hs, [&](auto h) { has = kFewestBufs<decltype(h)::value> == 1; });
  return has;
}

void attention_force_single_buffers(bool on) { g_force_single_buffers = on; }

int64_t attention_tensor_core_smem(int64_t hs) {
  int64_t bytes = 0;
  with_head_size(hs, [&](auto h) { bytes = tensor_core_smem<decltype(h)::value>(); });
  return bytes;
}

namespace {
// What stops the tensor cores at a shape on a device, without building a
// message (attention_tensor_core_ok runs on every call).
enum class TcBlocker { kNone, kHeadSize, kWidth, kComputeCapability, kSharedMemory };
struct TcDevice {
  int device = 0, major = 0, smem_optin = 0;
};
// Queried on every call: attribute reads (no host sync, no driver work),
// where a cache would have to follow cudaSetDevice.
TcDevice current_device() {
  TcDevice d;
  GPT_CUDA_OK(cudaGetDevice(&d.device));
  GPT_CUDA_OK(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, d.device));
  GPT_CUDA_OK(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, d.device));
  return d;
}
TcBlocker tc_blocker(const AttentionShape& s, const TcDevice& d) {
  const int64_t hs = s.C / s.NH;
  if (!attention_supported(hs)) return TcBlocker::kHeadSize;
  if (s.C % 8 != 0) return TcBlocker::kWidth;
  if (d.major < 8) return TcBlocker::kComputeCapability;
  if (attention_tensor_core_smem(hs) > d.smem_optin) return TcBlocker::kSharedMemory;
  return TcBlocker::kNone;
}
std::string kib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  return buf;
}
}  // namespace

bool attention_tensor_core_ok(const AttentionShape& s, const void* const* ptrs, int nptrs) {
  for (int k = 0; k < nptrs; ++k)
    if (reinterpret_cast<uintptr_t>(ptrs[k]) % 16 != 0) return false;
  return tc_blocker(s, current_device()) == TcBlocker::kNone;
}

}  // namespace gpt::cuda::detail

namespace gpt::cuda {

std::string attention_tensor_cores_unavailable(const AttentionShape& s) {
  using detail::TcBlocker;
  const detail::TcDevice d = detail::current_device();
  const int64_t hs = s.C / s.NH;
  int minor = 0;
  GPT_CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d.device));
  const std::string cc = std::to_string(d.major) + "." + std::to_string(minor);
  switch (detail::tc_blocker(s, d)) {
    case TcBlocker::kNone: return "";
    case TcBlocker::kHeadSize:
      return "head size " + std::to_string(hs) + " (supported: " + attention_head_sizes() + ")";
    case TcBlocker::kWidth: return "C = " + std::to_string(s.C) + " is not a multiple of 8";
    case TcBlocker::kComputeCapability: return "compute capability " + cc + " (8.0 or newer needed)";
    case TcBlocker::kSharedMemory:
      return "at head size " + std::to_string(hs) + " their blocks take " +
             detail::kib(detail::attention_tensor_core_smem(hs)) + " of shared memory, and this GPU (compute "
             "capability " + cc + ") gives a block " + detail::kib(d.smem_optin);
  }
  return "";
}

}  // namespace gpt::cuda

namespace gpt::cuda::detail {

void attention_forward_tc(bf16* out, float* lse, const bf16* qkv, const AttentionShape& s, cudaStream_t stream,
                          bool wide) {
  with_head_size(s.C / s.NH, [&](auto hs) { forward_hs<decltype(hs)::value>(out, lse, qkv, s, stream, wide); });
}

void attention_backward_tc(bf16* dqkv, const float* delta, const bf16* dout, const bf16* qkv, const float* lse,
                           const AttentionShape& s, cudaStream_t stream, bf16* ds, int64_t ds_pairs) {
  const int smem_optin = current_device().smem_optin;
  with_head_size(s.C / s.NH, [&](auto hs) {
    backward_hs<decltype(hs)::value>(dqkv, delta, dout, qkv, lse, s, stream, ds, ds_pairs, smem_optin);
  });
}

}  // namespace gpt::cuda::detail
