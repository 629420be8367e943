// What the trainer drives: the model, unit by unit, on the host (GPT<float>,
// model/gpt.hpp) or on a GPU (DeviceGPT<T>, model/cuda/gpt_cuda.hpp), behind
// one interface. Parameter and gradient pointers are the strategy's, in the
// arena's memory and the strategy's param dtype; tokens are host arrays.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "comm/mpi_env.hpp"
#include "core/memory.hpp"
#include "core/trace.hpp"
#include "model/gpt.hpp"
#include "model/layout.hpp"
#include "strategies/arena.hpp"

namespace gpt {

class UnitModel {
 public:
  virtual ~UnitModel() = default;
  virtual void set_shape(int B, int Tn) = 0;
  // Host tokens and targets of the next pass, B*T each (valid until the
  // next call); targets may be null for a pass without loss (sampling).
  virtual void set_batch(const int32_t* tokens, const int32_t* targets) = 0;
  virtual void forward_embedding(const void* emb) = 0;
  virtual void forward_block(int layer, const void* block) = 0;
  // Loss of the batch (collected by take_loss); with emb_grad the LM head's
  // backward too (see model/gpt.hpp).
  virtual void forward_head(const void* fin, const void* emb, void* emb_grad, float loss_scale) = 0;
  // Mean loss of the forward_head calls since the last take_loss (the GPU
  // waits here: once per step, and once per validation).
  virtual double take_loss() = 0;
  // The last forward_head's per-position losses, B*T floats in batch order,
  // copied to host slot `slot` (0 or 1) without waiting; row_losses_ready
  // waits for that copy and returns the slot, valid until the next copy into
  // it. So a caller scores one pass while the device computes the next
  // (HellaSwag: one wait per pass, for the pass before).
  virtual void copy_row_losses(int slot) = 0;
  virtual const float* row_losses_ready(int slot) = 0;
  virtual void backward_final(const void* fin, void* fin_grad) = 0;
  virtual void backward_block(int layer, const void* block, void* block_grad) = 0;
  virtual void backward_embedding(void* emb_grad) = 0;
  // Host logits[padded_vocab] of one row after a forward (sampling).
  virtual void logits_row(const void* fin, const void* emb, int64_t row, float* out) = 0;
  // Incremental passes with a key/value cache (GPT::set_decode's contract).
  // Returns false, and changes nothing, where the model has no cache (the
  // device model past cuda::attention_decode_max_positions()).
  virtual bool set_decode(int /*pos*/) { return false; }
};

std::unique_ptr<UnitModel> make_host_model(const ParamLayout& layout, const GPTOptions& opt, MemoryTracker* tracker);

// --device cuda: the arena, the model and the stream of one GPU, created
// together (strategies/cuda/device_backend.cpp). make_device_backend throws
// ConfigError when this build has no CUDA or the machine no GPU.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual Arena* arena() = 0;
  virtual std::unique_ptr<UnitModel> make_model(const ParamLayout& layout, const GPTOptions& opt) = 0;
  virtual void* stream() = 0;  // cudaStream_t: the compute stream communicators order against
  virtual std::string device_name() const = 0;
  virtual int device_index() const = 0;  // the CUDA device this rank uses
  virtual int64_t reserved_bytes() const = 0;  // held from the device, cached blocks included
  // One line where this rank's GPU runs PTX its driver compiles (no code of
  // its own in this build: core/cuda/device_query.hpp), else "".
  virtual std::string driver_compiled_code_note() const { return ""; }
  // Why cuDNN's fused attention cannot run this rank's passes of B
  // sequences of T tokens (width C, NH heads), or "" when it can: its plans
  // are then built on this device, so the model made next finds them
  // (--attention auto; model/cuda/attention_cudnn.hpp). `trains`: the
  // training passes, both directions; else an evaluation's forward passes,
  // the forward's plan alone (a forward-only model runs no backward).
  virtual std::string cudnn_attention_unavailable(int /*B*/, int /*T*/, int /*C*/, int /*NH*/, bool /*trains*/) {
    return "this backend has no cuDNN attention";
  }
  // Why our bf16 attention kernels cannot take the tensor cores for these
  // passes on this device, so that the CUDA-core ones run (slower, no
  // stored dS), or "" when they can (model/cuda/attention.hpp
  // attention_tensor_cores_unavailable). "" for an fp32 backend.
  virtual std::string tensor_core_attention_unavailable(int /*B*/, int /*T*/, int /*C*/, int /*NH*/) { return ""; }
  // --trace: marks of the training loop's spans on the compute stream
  // (strategies/cuda/stream_marks.hpp), or nullptr.
  virtual std::unique_ptr<trace::DeviceMarks> make_trace_marks() { return nullptr; }
};
// The GPU this rank uses (--device cuda), found before the backend exists:
// pick_gpu's choice among the GPUs it sees, what CUDA says of it, and how
// many of the node's ranks use that same physical GPU, compared by UUID,
// so that ranks which each see one GPU of their own (srun
// --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank) are not taken for
// ranks sharing one. Collective over `base`; nullopt in a build without
// CUDA or where this rank sees no GPU.
struct RankGpu {
  int device = 0;  // the CUDA device index in this process
  std::string name, uuid;
  int64_t memory = 0;  // bytes, the whole device's
  int sms = 0;         // its multiprocessors (a MIG instance has a share of its GPU's)
  int ranks = 1;       // the node's ranks using it, this one included
  // This rank's share of the GPU's dense peak (model/flops.hpp: by name, a
  // MIG instance's share of its GPU's), at bf16 or fp32; 0 when the name is
  // unknown. What MFU divides by and what --strategy auto plans with.
  double peak_flops(bool bf16) const;
};
std::optional<RankGpu> rank_gpu(MPI_Comm base);
// Throws ConfigError when there is no GPU, or when ranks share it and
// `allow_sharing` is false (NCCL needs one GPU per rank; the MPI
// communicator stages device buffers through host memory and allows it).
std::unique_ptr<DeviceBackend> make_device_backend(const std::optional<RankGpu>& gpu, bool allow_sharing,
                                                   DType param_dtype, MemoryTracker* tracker);

}  // namespace gpt
