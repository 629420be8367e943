#include <initializer_list>
#include <string>
#include <type_traits>

#include "model/cuda/attention.hpp"
#include "model/cuda/attention_decode_kernels.cuh"
#include "model/cuda/attention_simt_kernels.cuh"
#include "model/cuda/attention_tc.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/launch.cuh"
#include "model/cuda/dtype.cuh"

namespace gpt::cuda {
namespace {

using namespace detail::simt;
using detail::with_head_size;

template <typename T, int HS>
void forward_hs(T* out, float* lse, const T* qkv, const AttentionShape& s, cudaStream_t stream) {
  detail::launch_kernel(attention_forward_kernel<T, HS>, forward_grid<HS>(s.B, s.T, s.NH), 32 * kFwdWarps, 0, stream,
                        out, lse, qkv, int(s.T), int(s.C), int(s.NH), 1.f / sqrtf(float(HS)));
}

template <typename T, int HS>
void delta_hs(float* delta, const T* dout, const T* out, const AttentionShape& s, cudaStream_t stream) {
  const int64_t rows = s.B * s.NH * s.T;
  const bool vec = vector_width<T>(s.C, {dout, out}) > 1;
  detail::launch_kernel(attention_delta_kernel<T, HS>, delta_grid<T, HS>(rows), kDeltaThreads, 0, stream, delta, dout,
                        out, int(s.T), int(s.C), int(s.NH), rows, vec);
}

template <typename T, int HS>
void backward_hs(T* dqkv, const float* delta, const T* dout, const T* qkv, const float* lse, const AttentionShape& s,
                 cudaStream_t stream) {
  const dim3 grid = backward_grid<HS>(s.B, s.T, s.NH);
  const float scale = 1.f / sqrtf(float(HS));
  detail::launch_kernel(attention_dkv_kernel<T, HS>, grid, 32, 0, stream, dqkv, dout, qkv, lse, delta, int(s.T),
                        int(s.C), int(s.NH), scale);
  detail::launch_kernel(attention_dq_kernel<T, HS>, grid, 32, 0, stream, dqkv, dout, qkv, lse, delta, int(s.T),
                        int(s.C), int(s.NH), scale);
}

void require_head_size(const AttentionShape& s) {
  if (!attention_supported(s.C / s.NH))
    throw_error("attention head size " + std::to_string(s.C / s.NH) + " is not supported on cuda (" +
                attention_head_sizes() + ")");
}

// Whether to run the tensor-core kernels on these buffers.
template <typename T>
bool use_tensor_cores(AttentionKernel kernel, const AttentionShape& s, std::initializer_list<const void*> ptrs) {
  if (kernel == AttentionKernel::kSimt) return false;
  bool ok = false;
  if constexpr (std::is_same_v<T, bf16>) ok = detail::attention_tensor_core_ok(s, ptrs.begin(), int(ptrs.size()));
  if ((kernel == AttentionKernel::kTensorCore || kernel == AttentionKernel::kTensorCoreWide) && !ok) {
    std::string why = std::is_same_v<T, bf16> ? attention_tensor_cores_unavailable(s) : "the buffers are fp32";
    throw_error("tensor-core attention cannot run: " + (why.empty() ? "a buffer is not 16-byte aligned" : why) +
                " (it needs bf16, a head size of " + attention_head_sizes() +
                ", C a multiple of 8, 16-byte aligned buffers, compute capability 8.0 or newer and the shared "
                "memory its blocks take)");
  }
  if (kernel == AttentionKernel::kTensorCoreWide && s.C / s.NH != 32 && s.C / s.NH != 64)
    throw_error("the wide tensor-core attention forward takes head sizes 32 and 64");
  return ok;
}

}  // namespace

// Each needs its kernels compiled (detail::with_head_size): the tensor-core
// tiles take multiples of 16, the CUDA-core kernels up to 64 elements a lane.
bool attention_supported(int64_t hs) { return hs % 16 == 0 && hs >= 32 && hs <= 128; }
std::string attention_head_sizes() {  // the list attention_supported() gives, so the two cannot disagree
  std::string list;
  for (int64_t hs = 1; hs <= 256; ++hs)
    if (attention_supported(hs)) list += (list.empty() ? "" : ", ") + std::to_string(hs);
  return list;
}

template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, const AttentionShape& s, cudaStream_t stream,
                       AttentionKernel kernel) {
  require_head_size(s);
  if (use_tensor_cores<T>(kernel, s, {out, qkv})) {
    if constexpr (std::is_same_v<T, bf16>)
      detail::attention_forward_tc(out, lse, qkv, s, stream, kernel == AttentionKernel::kTensorCoreWide);
    return;
  }
  with_head_size(s.C / s.NH, [&](auto hs) { forward_hs<T, decltype(hs)::value>(out, lse, qkv, s, stream); });
}

template <typename T>
void attention_backward(T* dqkv, float* scratch, int64_t scratch_floats, const T* dout, const T* qkv, const T* out,
                        const float* lse, const AttentionShape& s, cudaStream_t stream, AttentionKernel kernel) {
  require_head_size(s);
  if (scratch_floats < attention_backward_scratch(s))
    throw_error("attention_backward: scratch of " + std::to_string(scratch_floats) + " floats, " +
                std::to_string(attention_backward_scratch(s)) + " needed");
  float* delta = scratch;
  with_head_size(s.C / s.NH, [&](auto hs) { delta_hs<T, decltype(hs)::value>(delta, dout, out, s, stream); });
  if (use_tensor_cores<T>(kernel, s, {dqkv, dout, qkv})) {
    if constexpr (std::is_same_v<T, bf16>) {
      const int64_t delta_floats = attention_delta_floats(s.B, s.T, s.NH);
      const int64_t pairs = attention_ds_pairs_fit(s.B, s.T, s.NH, (scratch_floats - delta_floats) * 4);
      detail::attention_backward_tc(dqkv, delta, dout, qkv, lse, s, stream,
                                    reinterpret_cast<bf16*>(scratch + delta_floats), pairs);
    }
    return;
  }
  with_head_size(s.C / s.NH,
                 [&](auto hs) { backward_hs<T, decltype(hs)::value>(dqkv, delta, dout, qkv, lse, s, stream); });
}

int64_t attention_decode_max_positions() { return detail::kDecodeMaxKeys; }

template <typename T>
void attention_decode(T* out, const T* q, const T* kv, int64_t P, int64_t C, int64_t NH, cudaStream_t stream) {
  require_head_size({1, 1, C, NH});
  if (P < 1 || P > detail::kDecodeMaxKeys)
    throw_error("attention_decode over " + std::to_string(P) + " positions: 1 to " +
                std::to_string(detail::kDecodeMaxKeys) + " supported");
  with_head_size(C / NH, [&](auto hs) {
    constexpr int HS = decltype(hs)::value;
    detail::launch_kernel(detail::attention_decode_kernel<T, HS>, dim3(unsigned(NH)), detail::kDecodeThreads, 0,
                          stream, out, q, kv, int(P), int(C), 1.f / sqrtf(float(HS)));
  });
}

template void attention_forward<float>(float*, float*, const float*, const AttentionShape&, cudaStream_t,
                                       AttentionKernel);
template void attention_forward<bf16>(bf16*, float*, const bf16*, const AttentionShape&, cudaStream_t,
                                      AttentionKernel);
template void attention_backward<float>(float*, float*, int64_t, const float*, const float*, const float*,
                                        const float*, const AttentionShape&, cudaStream_t, AttentionKernel);
template void attention_backward<bf16>(bf16*, float*, int64_t, const bf16*, const bf16*, const bf16*, const float*,
                                       const AttentionShape&, cudaStream_t, AttentionKernel);

template void attention_decode<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, cudaStream_t);
template void attention_decode<bf16>(bf16*, const bf16*, const bf16*, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace gpt::cuda
