// Causal self-attention on the device, fused (flash-attention style): the
// T x T score matrix is never materialised. Forward keeps, per query row,
// only the log-sum-exp of its scores (lse[B, NH, T], fp32); backward
// recomputes the probabilities from q, k and lse.
//
// Layout and scaling as model/cpu/attention.hpp: qkv[B, T, 3C] holds
// q | k | v, head h at columns [h*hs, (h+1)*hs) of each; scores are scaled
// by 1/sqrt(hs). All arithmetic is fp32 whatever the storage type.
//
// Two implementations, both deterministic (every output element is written
// by exactly one thread), for head sizes the multiples of 16 from 32 to 128
// (64 is every GPT-2 size's; attention_supported() says whether a head size
// is one):
//  - kTensorCore (attention_tc.cu, bf16 only): FlashAttention-2 structure on
//    bf16 tensor cores with fp32 accumulation, 64-row tiles;
//  - kSimt: CUDA cores, one lane per query row (forward, dq) or key row (dk,
//    dv), two above head size 64, online softmax in registers, 32-row tiles
//    (16 in the backward above 64); the fp32 path, and the reference the
//    tensor-core kernels are tested and benchmarked against.
// kAuto takes the tensor cores whenever they apply (bf16, C a multiple of 8,
// 16-byte aligned pointers, compute capability >= 8.0, and the shared
// memory their blocks take at the head size: see
// attention_tensor_cores_unavailable). Their backward
// recomputes the probabilities for dK/dV and, unless the caller's scratch
// holds the stored score gradients (model/attention_ds.hpp), again for dQ.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "model/attention_ds.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda {

struct AttentionShape {
  int64_t B, T, C, NH;
};

// kTensorCoreWide: the tensor-core kernels with the forward on 128-query
// tiles (attention_tc_forward.cuh forward_wide_kernel; head sizes 32 and
// 64 only), for measuring it against the 64-query one that kAuto and kTensorCore
// take.
enum class AttentionKernel { kAuto, kSimt, kTensorCore, kTensorCoreWide };

bool attention_supported(int64_t head_size);
// The head sizes attention_supported() takes, for messages: "32, 48, ..., 128".
std::string attention_head_sizes();

// Why kAuto runs the CUDA-core kernels, not the tensor-core ones, for bf16
// buffers (16-byte aligned) of shape s on the current device, in one line;
// "" when it runs the tensor cores. Besides a shape they do not take, the
// device: compute capability below 8.0, or less shared memory a block than
// they must have at this head size (attention_tc.hpp: at 128 the forward's
// 85 KiB, the backward single-buffered where a block cannot have its
// double buffers' 103 KiB; every GPU of compute capability 8.0 or newer
// gives at least 99 KiB).
std::string attention_tensor_cores_unavailable(const AttentionShape& s);

// out[B, T, C]; lse[B, NH, T] saved for backward. kTensorCore where it does
// not apply is an error.
template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, const AttentionShape& s, cudaStream_t stream,
                       AttentionKernel kernel = AttentionKernel::kAuto);

// Floats of scratch attention_backward needs: the row terms delta
// [B, NH, T] (rounded up to 16 bytes); with a budget of `ds_budget` bytes
// for the tensor-core kernels' stored score gradients (bf16 only;
// model/attention_ds.hpp), room for them after it.
inline int64_t attention_backward_scratch(const AttentionShape& s, int64_t ds_budget = 0) {
  return attention_backward_scratch_bytes(s.B, s.T, s.NH, ds_budget) / 4;
}

// dqkv[B, T, 3C] = gradient wrt qkv (overwritten) given dout[B, T, C] and
// the forward's out and lse. scratch: scratch_floats floats, at least
// attention_backward_scratch(s); on tensor cores, the (b, h) pairs whose
// score gradients fit past delta (attention_ds_pairs_fit) decide: dQ from
// them, that many pairs per launch, or (none) recomputed.
template <typename T>
void attention_backward(T* dqkv, float* scratch, int64_t scratch_floats, const T* dout, const T* qkv, const T* out,
                        const float* lse, const AttentionShape& s, cudaStream_t stream,
                        AttentionKernel kernel = AttentionKernel::kAuto);

// One new position of an incremental (key/value-cached) pass, for sampling
// (model/cpu/attention.hpp attention_decode's contract): out[C] from the
// new position's queries q[C] against kv[P, 2C], the keys then values of
// positions [0, P), the new one included. P <= attention_decode_max_positions().
int64_t attention_decode_max_positions();
template <typename T>
void attention_decode(T* out, const T* q, const T* kv, int64_t P, int64_t C, int64_t NH, cudaStream_t stream);

}  // namespace gpt::cuda
