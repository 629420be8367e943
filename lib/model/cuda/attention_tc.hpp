// Tensor-core (bf16 mma.sync, fp32 accumulation) kernels of the fused causal
// attention declared in attention.hpp. Internal to the backend: callers go
// through attention_forward/attention_backward, which pick these kernels
// when attention_tensor_core_ok() holds.
//
// Same contracts as the CUDA-core kernels (out, lse, dqkv; deterministic:
// every output element has one writer, no atomics). Differences that change
// results within bf16 rounding: the probabilities P and the score gradients
// dS are rounded to bf16 before they enter a tensor-core product, as in
// FlashAttention-2.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "model/cuda/attention.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda::detail {

// f(std::integral_constant<int, HS>{}) for a head size attention_supported()
// takes: the launchers' one dispatch from a run-time head size to kernels
// compiled for it (attention.cu, attention_tc.cu).
template <typename F>
void with_head_size(int64_t hs, F&& f) {
  switch (hs) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 48: return f(std::integral_constant<int, 48>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 80: return f(std::integral_constant<int, 80>{});
    case 96: return f(std::integral_constant<int, 96>{});
    case 112: return f(std::integral_constant<int, 112>{});
    default: return f(std::integral_constant<int, 128>{});
  }
}

// Bytes of shared memory a block of the tensor-core kernels must be given at
// head size hs (attention_supported()) for them to run: the most any of them
// takes, forward or backward, with the backward's fewest buffers. At 128 the
// forward's 85 KiB: the double-buffered backward takes 103 KiB, more than
// the 99 KiB a block may have on compute capability 8.6, 8.9 and 12.0 (A10,
// L4, L40S, RTX 30/40/50), which run it single-buffered (69 KiB); 91 KiB at
// 112, 55 KiB at 64.
int64_t attention_tensor_core_smem(int64_t hs);

// Whether the backward is compiled single-buffered at head size hs (128
// only), for GPUs that cannot give a block its double buffers.
bool attention_has_single_buffers(int64_t hs);
// Tests: the backward single-buffered wherever that is compiled on any GPU,
// as on one of 99 KiB a block; it computes the same bits.
void attention_force_single_buffers(bool on);

// The shape and the current device (attention_tensor_cores_unavailable),
// bf16 storage, and every pointer 16-byte aligned (the kernels move
// 16-byte vectors). Allocates nothing: called on every attention call.
bool attention_tensor_core_ok(const AttentionShape& s, const void* const* ptrs, int nptrs);

// wide: 128-query tiles (forward_wide_kernel) instead of 64.
void attention_forward_tc(bf16* out, float* lse, const bf16* qkv, const AttentionShape& s, cudaStream_t stream,
                          bool wide = false);

// delta[B, NH, T] = rowsum(dout * out), computed by the caller (the same
// kernel serves both implementations). ds_pairs > 0: dQ from the score
// gradients stored in ds (16-byte aligned, ds_pairs *
// attention_ds_bytes_per_pair(T) bytes), ds_pairs (b, h) pairs per launch;
// 0: dQ recomputed, ds unused.
void attention_backward_tc(bf16* dqkv, const float* delta, const bf16* dout, const bf16* qkv, const float* lse,
                           const AttentionShape& s, cudaStream_t stream, bf16* ds, int64_t ds_pairs);

}  // namespace gpt::cuda::detail
