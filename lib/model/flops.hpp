// Model FLOPs per token for one training step (forward + backward), PaLM's
// convention (Chowdhery et al. 2022, appendix B):
//   6 * Ψ_matmul + 12 * L * C * T
// Ψ_matmul counts every weight that takes part in a matrix product: per block
// c_attn (3C·C), attn c_proj (C·C), c_fc (4C·C), mlp c_proj (4C·C), plus the
// tied LM head (V·C, the real vocabulary, not the padded one). Position
// embeddings, biases and LayerNorms are excluded. 12·L·C·T counts the
// attention score and value products (2·T·C multiply-adds per token per layer
// forward, ×3 for forward + backward, ×2 FLOPs per multiply-add), without
// discounting the causal mask. Recomputation (activation checkpointing) is
// not counted: this is *model* FLOPs, so MFU is comparable across settings.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.hpp"

namespace gpt {

int64_t matmul_params(const GPTConfig& c);
double train_flops_per_token(const GPTConfig& c, int seq_len);

// The same count split by the part of the step that spends it (their sum is
// train_flops_per_token): the blocks forward (2 x the blocks' matmul weights
// + the attention products forward, 4*L*C*T), the tied LM head forward and
// backward (6 x V*C), and the blocks backward (twice their forward).
struct StepFlops {
  double blocks_forward, head, blocks_backward;
};
StepFlops step_flops_per_token(const GPTConfig& c, int seq_len);
// One forward pass (an evaluation's): a third of train_flops_per_token,
// the blocks forward and the head's forward GEMM (2 x V*C).
double forward_flops_per_token(const GPTConfig& c, int seq_len);

}  // namespace gpt

namespace gpt {

// Dense peak FLOP/s of a GPU by its CUDA device name (or a short one, as
// `plan --gpu` takes: the model's words, "H100 PCIe", "L40S"), for MFU's
// denominator: bf16 tensor-core peak without sparsity, with fp32
// accumulation, or fp32 (non tensor-core) when bf16 is false. 0 when the
// name is unknown.
//   H100 SXM / H200 / GH200: 989 TF bf16, 67 TF fp32; H100 PCIe: 756 / 51;
//   H100 NVL, H200 NVL: 835 / 60; B200, GB200 (HGX, 1000 W): 2250 / 80;
//   A100: 312 / 19.5; L40S: 362 / 91.6; L40: 181 / 90.5; A10: 125 / 31.2;
//   L4: 121 / 30.3; V100: 125 (fp16) / 15.7; A40: 149.7 / 37.4; RTX A6000:
//   154.8 / 38.7; RTX 6000 Ada: 364.2 / 91.1; RTX 4090: 165.2 / 82.6;
//   RTX 5090: 209.5 / 104.8; RTX 3090: 71 / 35.6; RTX 3090 Ti: 80 / 40;
//   H20: 148 / 44; L20: 119.5 / 59.8; RTX PRO 6000 Blackwell: 500 / 125;
//   H800, H800 PCIe, A800: their H100's and A100's; B300, GB300: 2250 / 75.
// `sms`, where given, is the device's multiprocessor count
// (cudaDeviceProp::multiProcessorCount): a MIG instance has a share of its
// GPU's (an H100 SXM has 132), and its peak is the same share of the GPU's;
// more than the product's, or 0, counts as the whole GPU.
double gpu_peak_flops(const std::string& device_name, bool bf16, int sms = 0);
// A GPU's memory by its name, for `plan --gpu NAME`: its model's (H100,
// H100 PCIe: 80; H100 NVL: 94; GH200: 96, or 144 for "GH200 144G"; H200,
// H200 NVL: 141; B200, GB200: 180, the HGX's 1.44 TB over 8; B300, GB300:
// 268 (288 GB, the HGX's 2.3 TB over 8); L40S, L40,
// A40, RTX A6000, RTX 6000 Ada, L20: 48; A10, L4, RTX 4090, RTX 3090 (Ti):
// 24; RTX 5090: 32; H20, RTX PRO 6000 Blackwell: 96; H800: 80),
// or for an A100, A800 or V100 the size its name states (A100-SXM4-40GB: 40;
// without one 80 and 32), counted in GiB as the planner's 80 GiB default
// is (an H100 80GB reports 79.2 GiB). 0 when the name is unknown.
int64_t gpu_memory_bytes(const std::string& device_name);
// The bytes/s a rank sends in a ring all-reduce among a node's GPUs of this
// name (the planner's intra-node bandwidth; NCCL's "bus bandwidth"): 80% of
// the GPU's link bandwidth per direction, NVLink's to the node's switch
// (H100, H200, GH200, H20: 450 GB/s -> 360, as nccl-tests measures 8 H100
// SXM; B200, B300: 900 -> 720; A100 SXM: 300 -> 240, where nccl-tests reports of
// 8 A100 SXM4 show 200-230; H800, A800 SXM: 200 -> 160; V100 SXM2: 150 ->
// 120), or for a PCIe card, and an NVLink GPU whose name says PCIe, the PCIe
// x16 link's (gen 5, H100 PCIe, H100 NVL, H200 NVL, H800 PCIe, RTX 5090, RTX
// PRO 6000 Blackwell: 64 -> 51.2; gen 4, A100 PCIe, A800 PCIe, L40S, L40,
// A10, L4, L20, A40, RTX A6000, RTX 6000 Ada, RTX 4090, RTX 3090 (Ti): 32 ->
// 25.6; gen 3, V100 PCIe: 16 -> 12.8). 0 when the name is unknown.
double gpu_ring_bandwidth(const std::string& device_name);
// The table's names, most specific first, comma-separated (for errors).
std::string gpu_names();

}  // namespace gpt
