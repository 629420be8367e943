// Sizing of the GPU attention backward's scratch: its row terms delta and
// the stored score gradients.
//
// The tensor-core backward (model/cuda/attention_tc_backward.cuh) can keep
// the score gradients dS = P (dP - delta) that its dK/dV kernel computes,
// in bf16, and take dQ = dS K from them: one matrix product instead of
// recomputing S = Q K^T and dP = dO V^T (three products and the
// exponentials). The price is memory and its traffic: one 64 x 64 bf16
// tile per pair of query tile and key tile at or below the diagonal, for
// every (b, h) pair a launch covers; for gpt2-124m at B = 16, T = 1024
// (192 pairs) 204 MiB, written once and read once per layer.
//
// A byte budget bounds it: the backward covers the (b, h) pairs in as few
// launches as the budget allows, or recomputes dQ when a launch would hold
// too few blocks to fill a GPU. Host-only arithmetic, shared by the model
// (which allocates the scratch: model/cuda/attention.hpp) and the planner's
// memory model (strategies/cost_model.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace gpt {

// The default budget (GPTOptions::attention_ds_budget, --attention-ds-mib):
// none, dQ recomputed. On an H100 recomputing was the faster (backward 0.392
// against 0.437 ms per layer at gpt2-124m B=16 T=1024, README "Measured on
// an H100") and stores nothing; a budget is opt-in.
constexpr int64_t kAttentionDsDefaultBytes = 0;
// The budget the benchmarks' stored-dS rows use (--attention-ds-mib 256,
// the default before stop 51: all of gpt2-124m's pairs at B=16 T=1024).
constexpr int64_t kAttentionDsStoredBytes = int64_t(256) << 20;

// The tensor-core kernels' 64-row tiles of a sequence of T.
inline int64_t attention_tiles(int64_t T) { return (T + 63) / 64; }

// Bytes of stored dS per (b, h) pair at sequence length T.
inline int64_t attention_ds_bytes_per_pair(int64_t T) {
  const int64_t tiles = attention_tiles(T);
  return tiles * (tiles + 1) / 2 * 64 * 64 * 2;
}

// (b, h) pairs per launch that `bytes` of scratch hold (what the backward
// uses: 0 recomputes dQ).
inline int64_t attention_ds_pairs_fit(int64_t B, int64_t T, int64_t NH, int64_t bytes) {
  return std::min(B * NH, std::max<int64_t>(0, bytes) / attention_ds_bytes_per_pair(T));
}

// Blocks a launch of the dK/dV kernel needs to be worth chunking for (an
// H100 holds about 400 of them at once).
constexpr int64_t kAttentionDsMinBlocks = 512;

// Bytes of scratch to allocate for a budget: room for all B * NH pairs when
// they fit; for fewer when they give a launch at least kAttentionDsMinBlocks
// blocks; else none. A shorter sequence or a smaller batch then fits at
// least as many blocks per launch.
inline int64_t attention_ds_bytes(int64_t B, int64_t T, int64_t NH, int64_t budget) {
  const int64_t pairs = attention_ds_pairs_fit(B, T, NH, budget);
  const bool worth = pairs == B * NH || pairs * attention_tiles(T) >= kAttentionDsMinBlocks;
  return worth ? pairs * attention_ds_bytes_per_pair(T) : 0;
}

// How the backward covers `total` (b, h) pairs when `fit` of them fit the
// stored dS at once (0: none, dQ is recomputed): in as few launches as fit,
// of equal size (256 pairs in room for 240 would leave a last launch of 16,
// too few blocks to fill a GPU: 128 and 128 instead); the last launch may
// have fewer pairs.
struct AttentionDsLaunches {
  int64_t count = 0, pairs = 0;  // launches, and pairs per launch
};
inline AttentionDsLaunches attention_ds_launches(int64_t total, int64_t fit) {
  if (fit <= 0 || total <= 0) return {};
  const int64_t count = (total + fit - 1) / fit;
  return {count, (total + count - 1) / count};
}

// The run log's line on how a bf16 attention backward at B x T with NH
// heads computes dQ under a dS budget of `budget` bytes (--attention-ds-mib):
// from the stored score gradients (in how many launches, how many MiB), or
// recomputed, and why.
std::string describe_attention_ds(int64_t B, int64_t T, int64_t NH, int64_t budget);

// The backward's row terms delta [B, NH, T] in fp32, rounded up to 16 bytes
// so that the stored dS after them is aligned.
inline int64_t attention_delta_floats(int64_t B, int64_t T, int64_t NH) { return (B * NH * T + 3) / 4 * 4; }

// All of the backward's scratch, in bytes: delta, then dS within ds_budget
// (0 for fp32, whose kernels store none).
inline int64_t attention_backward_scratch_bytes(int64_t B, int64_t T, int64_t NH, int64_t ds_budget) {
  return 4 * attention_delta_floats(B, T, NH) + attention_ds_bytes(B, T, NH, ds_budget);
}

// cuDNN's fused attention (model/cuda/attention_cudnn.hpp, --attention
// cudnn) instead of the tensor-core kernels. Its workspace is laid out in
// 256-byte aligned parts: the engine's own, then the backward's fp32 dQ
// accumulator [B, T, C]. The planner counts both.
constexpr int64_t kAttentionCudnnAlign = 256;
inline int64_t attention_cudnn_aligned(int64_t bytes) {
  return (bytes + kAttentionCudnnAlign - 1) / kAttentionCudnnAlign * kAttentionCudnnAlign;
}
inline int64_t attention_cudnn_backward_data_bytes(int64_t B, int64_t T, int64_t C) {
  return attention_cudnn_aligned(4 * B * T * C);
}
// The engine's own workspace, the larger of the two directions', on an H100
// or H200, as cuDNN 9.19 plans its sm90 flash kernels and the backend
// allocates it (rounded up to 256 bytes): the size of the backward's fp32
// softmax sums [B, NH, T] (virtual in our graph, so the engine keeps them;
// cuDNN aligns them to 128 bytes), and 256 bytes more (the forward asks for
// 256). Only
// cuDNN knows it; tests/unit/test_cudnn_attention.cpp has it plan the
// kernels without a GPU and checks this. A B200's sm100 kernels at the
// GPT-2 presets' shapes ask for no more (the backward 128 bytes less). An
// A100's sm80 backward asks for about 4 B T C bytes more (the size of a
// second fp32 dQ accumulator), which the planner, sized for the H100/H200,
// does not count; so does a B200's where cuDNN 9.19 plans its sm80 kernels
// for it (`tiny`: head size 32 at T = 128; T = 100 at head size 64).
inline int64_t attention_cudnn_engine_bytes(int64_t B, int64_t T, int64_t NH) {
  return attention_cudnn_aligned(4 * B * NH * T) + kAttentionCudnnAlign;
}
// The forward's engine workspace alone, all a forward-only model (an
// evaluation's) keeps of cuDNN's: 256 bytes on an H100 or H200 at every
// model preset (tests/unit/test_cudnn_attention.cpp), at least that on any
// GPU (the model allocates no less, so that a workspace is there to pass).
inline int64_t attention_cudnn_forward_engine_bytes() { return kAttentionCudnnAlign; }

}  // namespace gpt
