// Causal self-attention through cuDNN's fused attention (the scaled
// dot-product attention graphs of its backend API, as cuDNN's frontend and
// PyTorch's SDPA build them), beside our tensor-core kernels
// (attention.hpp): same layout (qkv[B, T, 3C] in, out[B, T, C]), same
// scaling, and the same per-row statistics lse[B, NH, T] (natural-log
// sum of the exponentials of the scaled scores), so either forward pairs
// with either backward. bf16 only; head sizes up to 128.
//
// The forward graph: S = scale * Q K^T, the causal mask (row >= column, else
// the lowest float), softmax with its statistics, O = P V. The backward:
// softmax_sum = rowsum(dO * O); P = exp(mask(scale * Q K^T) - lse);
// dV = P^T dO; dS = scale * P * (dO V^T - softmax_sum); dK = dS^T Q;
// dQ = dS K, accumulated in fp32 and converted. Both follow cuDNN's
// frontend's graphs for cuDNN 9 operation by operation (the softmax sums
// virtual, the dQ accumulator in the engine's 16x16-tile order), the path
// its engines are built and tested for. cuDNN picks and compiles an
// engine for each graph once per shape and device (NVRTC: seconds, in the
// first step), cached for the process. Its dQ accumulation uses atomics:
// unlike our kernels, two runs may differ in the last bits.
//
// Needs cuDNN >= 9.8 (the device-properties descriptor), opened on first use
// (cudnn_api.hpp). Without cuDNN's headers at build time, cudnn_attention_
// built() is false and the rest throws.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "model/cuda/attention.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda {

// Whether this build has cuDNN's attention (its headers were found).
bool cudnn_attention_built();

// Why cuDNN's attention cannot run in this process ("" when it can, a GPU
// aside): not built, cuDNN cannot be opened, or it is older than 9.8.
std::string cudnn_attention_unavailable();

// Why cuDNN's attention cannot run at shape s on the current device ("" when
// it can): the reasons above, a shape it does not support, or no engine
// for the forward graph or, with `backward`, the backward's. Builds and
// caches those plans (the workspace functions below), so this is the whole
// check, kernels compiled. A forward-only model (an evaluation) asks
// without `backward`: it never runs that graph, so a GPU without an engine
// for it still runs cuDNN's forward, and start-up compiles one plan.
std::string cudnn_attention_unavailable(const AttentionShape& s, bool backward = true);

// "cuDNN 9.19.0 (libcudnn.so.9)": the version and file opened, for logs
// and benchmark records ("" where it cannot run).
std::string cudnn_attention_library();

// Whether cuDNN's attention applies to this shape: bf16 buffers of C a
// multiple of 8 (16-byte aligned heads), head size a multiple of 8 up to 128.
bool cudnn_attention_supported(const AttentionShape& s);

// Bytes of device workspace each direction needs at shape s on the current
// device (builds and caches that direction's plan; throws if cuDNN has no
// engine for it). The backward's holds dQ's fp32 accumulator [B, NH, T, HS]
// beside the engine's own.
int64_t cudnn_attention_forward_workspace(const AttentionShape& s);
int64_t cudnn_attention_backward_workspace(const AttentionShape& s);

// attention_forward's and attention_backward's contracts, on cuDNN.
// workspace: at least the bytes above, 256-byte aligned; its contents need
// not survive between calls (the backward zeroes its dQ accumulator first).
// The host work per call is a lookup of the call's pointers (cuDNN's variant
// pack, made once per distinct set of buffers) and the launches.
void cudnn_attention_forward(bf16* out, float* lse, const bf16* qkv, const AttentionShape& s, void* workspace,
                             int64_t workspace_bytes, cudaStream_t stream);
void cudnn_attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse,
                              const AttentionShape& s, void* workspace, int64_t workspace_bytes, cudaStream_t stream);

// Without a GPU: one direction's plan at shape s for the device that
// `device_json` describes (cuDNN's device-properties JSON,
// CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION), chosen as on that device:
// cuDNN's heuristics offer engine configurations after their support checks,
// and the first whose execution plan finalizes is the one that would run
// (cuDNN 9.8's deviceless ahead-of-time build). Finalizing generates and
// compiles the engine's kernel (NVRTC) and hands it to the driver library,
// libcuda.so.1, to load; the toolkit's stub refuses every call, so there
// `chosen` is -1 and `why` says so (tests/unit/fake_libcuda accepts the
// loads). Throws on a graph cuDNN rejects.
struct CudnnAttentionPlan {
  int64_t configs = 0;           // offered by the heuristics, after their support checks
  int64_t chosen = -1;           // the first that finalized, or -1
  int64_t engine_workspace = 0;  // the chosen plan's own workspace, in bytes
  std::string why;               // when none finalized: the last one's reason
};
CudnnAttentionPlan cudnn_attention_plan(const AttentionShape& s, bool backward, const std::string& device_json);

}  // namespace gpt::cuda
