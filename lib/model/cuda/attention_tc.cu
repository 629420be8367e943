// Launchers of the tensor-core attention kernels (attention_tc_kernels.cuh).
#include <algorithm>
#include <cstdint>

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

template <int HS>
void backward_hs(bf16* dqkv, const float* delta, const bf16* dout, const bf16* qkv, const float* lse,
                 const AttentionShape& s, cudaStream_t stream, bf16* ds, int64_t ds_pairs) {
  const float scale = 1.f / sqrtf(float(HS));
  const int T = int(s.T), C = int(s.C), NH = int(s.NH);
  if (ds_pairs <= 0) {
    const dim3 grid = tile_grid(s.B, s.T, s.NH);
    launch<dkv_kernel<HS>>(dkv_smem<HS>(), grid, stream, dqkv, dout, qkv, lse, delta, T, C, NH, scale,
                           static_cast<bf16*>(nullptr), 0);
    launch<dq_kernel<HS>>(dq_smem<HS>(), grid, stream, dqkv, dout, qkv, lse, delta, T, C, NH, scale);
    return;
  }
  // The pairs in as few chunks as fit the stored dS, of equal size
  // (attention_ds_launches). Each chunk's dQ launch reads what its dK/dV
  // launch wrote (same stream); the next chunk's dK/dV launch overwrites it
  // only after.
  const int64_t pairs = s.B * s.NH, per_launch = attention_ds_launches(pairs, ds_pairs).pairs;
  for (int64_t bh0 = 0; bh0 < pairs; bh0 += per_launch) {
    const dim3 grid = tile_grid_pairs(s.T, std::min(per_launch, pairs - bh0));
    launch<dkv_kernel<HS, true>>(dkv_smem<HS>(), grid, stream, dqkv, dout, qkv, lse, delta, T, C, NH, scale, ds,
                                 int(bh0));
    launch<dq_from_ds_kernel<HS>>(dq_from_ds_smem<HS>(), grid, stream, dqkv, static_cast<const bf16*>(ds), qkv, T, C,
                                  NH, scale, int(bh0));
  }
}

}  // namespace

bool attention_tensor_core_ok(const AttentionShape& s, const void* const* ptrs, int nptrs) {
  const int64_t hs = s.C / s.NH;
  if (!attention_supported(hs) || s.C % 8 != 0) return false;
  for (int k = 0; k < nptrs; ++k)
    if (reinterpret_cast<uintptr_t>(ptrs[k]) % 16 != 0) return false;
  int device = 0, major = 0;
  GPT_CUDA_OK(cudaGetDevice(&device));
  GPT_CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

void attention_forward_tc(bf16* out, float* lse, const bf16* qkv, const AttentionShape& s, cudaStream_t stream,
                          bool wide) {
  with_head_size(s.C / s.NH, [&](auto hs) { forward_hs<decltype(hs)::value>(out, lse, qkv, s, stream, wide); });
}

void attention_backward_tc(bf16* dqkv, const float* delta, const bf16* dout, const bf16* qkv, const float* lse,
                           const AttentionShape& s, cudaStream_t stream, bf16* ds, int64_t ds_pairs) {
  with_head_size(s.C / s.NH, [&](auto hs) {
    backward_hs<decltype(hs)::value>(dqkv, delta, dout, qkv, lse, s, stream, ds, ds_pairs);
  });
}

}  // namespace gpt::cuda::detail
