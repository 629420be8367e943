// --device cuda: the device arena (unit state in GPU memory, element-wise
// math as kernels on the compute stream) and the device model adapter.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "comm/bootstrap.hpp"
#include "core/cuda/device_memory.hpp"
#include "core/cuda/device_query.hpp"
#include "core/cuda/host_wait.hpp"
#include "core/error.hpp"
#include "model/cuda/adamw.hpp"
#include "model/cuda/attention_cudnn.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/elementwise.hpp"
#include "model/cuda/gpt_cuda.hpp"
#include "strategies/cuda/stream_marks.hpp"
#include "strategies/unit_model.hpp"

namespace gpt {
namespace {

using cuda::bf16;

class DeviceArena final : public Arena {
 public:
  DeviceArena(cuda::DeviceAllocator* alloc, cudaStream_t s) : alloc_(alloc), s_(s) {
    // Tests make the transfer pieces small, so that a tiny model's units take several.
    if (const char* v = std::getenv("GPT_TEST_TRANSFER_CHUNK"); v && std::atoll(v) > 0) transfer_chunk_ = std::atoll(v);
    norm_ = cuda::DeviceBuffer<double>(1, MemCategory::kScratch, alloc);
    scratch_ = cuda::DeviceBuffer<double>(size_t(cuda::sum_squares_scratch()), MemCategory::kScratch, alloc);
  }
  bool on_device() const override { return true; }
  void* allocate(size_t bytes, MemCategory cat, bool zeroed) override {
    void* p = alloc_->allocate(bytes, cat);
    if (zeroed) GPT_CUDA_OK(cudaMemsetAsync(p, 0, bytes, s_));
    return p;
  }
  void deallocate(void* p, size_t bytes, MemCategory cat) override { alloc_->deallocate(p, bytes, cat); }
  void zero(void* p, size_t bytes) override { GPT_CUDA_OK(cudaMemsetAsync(p, 0, bytes, s_)); }
  void convert(void* dst, DType dt, const void* src, DType st, int64_t n) override {
    if (dt == st) {
      if (dst != src) GPT_CUDA_OK(cudaMemcpyAsync(dst, src, size_t(n) * dtype_size(dt), cudaMemcpyDeviceToDevice, s_));
    } else if (dt == DType::kF32) {
      cuda::convert(static_cast<float*>(dst), static_cast<const bf16*>(src), n, s_);
    } else {
      cuda::convert(static_cast<bf16*>(dst), static_cast<const float*>(src), n, s_);
    }
  }
  void accumulate(void* acc, DType at, const void* src, DType st, int64_t n) override {
    GPT_CHECK(at == DType::kF32, "the device arena accumulates into fp32 only");
    if (st == DType::kF32)
      cuda::accumulate(static_cast<float*>(acc), static_cast<const float*>(src), n, s_);
    else
      cuda::accumulate(static_cast<float*>(acc), static_cast<const bf16*>(src), n, s_);
  }
  // The ranges are collected and summed in one launch per type at the end:
  // one launch for all of a rank's units (fp32 and bf16 ranges, should a
  // strategy mix them, each in their own). The lists keep their capacity, so
  // after the first step nothing is allocated here.
  void begin_norm() override {
    norm_.zero(s_);
    norm_f32_.clear();
    norm_bf16_.clear();
  }
  void add_squares(const void* x, DType t, int64_t n) override {
    if (t == DType::kF32)
      norm_f32_.add(static_cast<const float*>(x), n);
    else
      norm_bf16_.add(static_cast<const bf16*>(x), n);
  }
  double end_norm() override {
    flush_norm();
    double v = 0;
    GPT_CUDA_OK(cudaMemcpyAsync(&v, norm_.data(), sizeof v, cudaMemcpyDeviceToHost, s_));
    cuda::wait_stream(s_, "gradient norm");
    return v;
  }
  void end_norm_to(float* out) override {
    flush_norm();
    cuda::convert(out, norm_.data(), 1, s_);
  }
  void adamw(const UnitSpec& unit, int64_t begin, int64_t end, float* master, void* param, DType pt, const void* g,
             DType gt, float* m, float* v, const AdamWHyper& h, const AdamWStep& s) override {
    const bool g32 = gt == DType::kF32;
    if (pt == DType::kF32) {  // fp32: the master is the compute copy
      if (g32)
        cuda::adamw_update<float, float>(unit, begin, end, master, nullptr, static_cast<const float*>(g), m, v, h, s, s_);
      else
        cuda::adamw_update<bf16, float>(unit, begin, end, master, nullptr, static_cast<const bf16*>(g), m, v, h, s, s_);
    } else if (g32) {
      cuda::adamw_update<float, bf16>(unit, begin, end, master, static_cast<bf16*>(param),
                                      static_cast<const float*>(g), m, v, h, s, s_);
    } else {
      cuda::adamw_update<bf16, bf16>(unit, begin, end, master, static_cast<bf16*>(param), static_cast<const bf16*>(g),
                                     m, v, h, s, s_);
    }
  }
  // Host fp32 to and from bf16 go through an fp32 device buffer of at most
  // transfer_chunk_ elements, one piece after another on the stream: a
  // large unit (gpt2-1.5b's embedding, 80M parameters on one rank) needs
  // 64 MiB beside the model when it is loaded or saved, not 320 MB.
  void upload(void* dst, DType t, const float* host, int64_t n) override {
    if (n == 0) return;
    if (t == DType::kF32) {
      GPT_CUDA_OK(cudaMemcpyAsync(dst, host, size_t(n) * 4, cudaMemcpyHostToDevice, s_));
    } else {
      cuda::DeviceBuffer<float> tmp(size_t(std::min(n, transfer_chunk_)), MemCategory::kScratch, alloc_, false);
      for (int64_t i = 0; i < n; i += transfer_chunk_) {
        const int64_t k = std::min(transfer_chunk_, n - i);
        GPT_CUDA_OK(cudaMemcpyAsync(tmp.data(), host + i, size_t(k) * 4, cudaMemcpyHostToDevice, s_));
        convert(static_cast<char*>(dst) + i * dtype_size(t), t, tmp.data(), DType::kF32, k);
      }
      cuda::wait_stream(s_, "upload");  // tmp is freed (and may be reused) next
    }
    cuda::wait_stream(s_, "upload");  // the host buffer may go away after return
  }
  void download(float* host, const void* src, DType t, int64_t n) override {
    if (n == 0) return;
    if (t == DType::kF32) {
      GPT_CUDA_OK(cudaMemcpyAsync(host, src, size_t(n) * 4, cudaMemcpyDeviceToHost, s_));
    } else {
      cuda::DeviceBuffer<float> tmp(size_t(std::min(n, transfer_chunk_)), MemCategory::kScratch, alloc_, false);
      for (int64_t i = 0; i < n; i += transfer_chunk_) {
        const int64_t k = std::min(transfer_chunk_, n - i);
        convert(tmp.data(), DType::kF32, static_cast<const char*>(src) + i * dtype_size(t), t, k);
        GPT_CUDA_OK(cudaMemcpyAsync(host + i, tmp.data(), size_t(k) * 4, cudaMemcpyDeviceToHost, s_));
      }
    }
    cuda::wait_stream(s_, "download");
  }

 private:
  template <typename T>
  struct NormList {
    std::vector<const T*> x;
    std::vector<int64_t> n;
    void add(const T* p, int64_t size) {
      x.push_back(p);
      n.push_back(size);
    }
    void clear() {
      x.clear();
      n.clear();
    }
    void flush(double* out, double* scratch, cudaStream_t s) const {
      if (!x.empty()) cuda::sum_squares(x.data(), n.data(), int(x.size()), out, scratch, s);
    }
  };
  void flush_norm() {
    norm_f32_.flush(norm_.data(), scratch_.data(), s_);
    norm_bf16_.flush(norm_.data(), scratch_.data(), s_);
  }

  cuda::DeviceAllocator* alloc_;
  cudaStream_t s_;
  int64_t transfer_chunk_ = int64_t(1) << 24;  // elements: 64 MiB of fp32
  cuda::DeviceBuffer<double> norm_, scratch_;
  NormList<float> norm_f32_;  // the ranges since begin_norm(), by type
  NormList<bf16> norm_bf16_;
};

template <typename T>
class DeviceModel final : public UnitModel {
 public:
  DeviceModel(const ParamLayout& layout, const GPTOptions& opt, cuda::DeviceAllocator* alloc, cuda::Matmul* mm,
              cudaStream_t s)
      : m_(layout, opt, alloc, mm, s) {}
  void set_shape(int B, int Tn) override { m_.set_shape(B, Tn); }
  void set_batch(const int32_t* tokens, const int32_t* targets) override { m_.set_batch(tokens, targets); }
  void forward_embedding(const void* emb) override { m_.forward_embedding(t(emb)); }
  void forward_block(int layer, const void* block) override { m_.forward_block(layer, t(block)); }
  void forward_head(const void* fin, const void* emb, void* emb_grad, float loss_scale) override {
    m_.forward_head(t(fin), t(emb), static_cast<T*>(emb_grad), loss_scale);
  }
  double take_loss() override { return m_.take_loss(); }
  void copy_row_losses(int slot) override { m_.copy_row_losses(slot); }
  const float* row_losses_ready(int slot) override { return m_.row_losses_ready(slot); }
  void backward_final(const void* fin, void* fin_grad) override { m_.backward_final(t(fin), static_cast<T*>(fin_grad)); }
  void backward_block(int layer, const void* block, void* g) override {
    m_.backward_block(layer, t(block), static_cast<T*>(g));
  }
  void backward_embedding(void* emb_grad) override { m_.backward_embedding(static_cast<T*>(emb_grad)); }
  void logits_row(const void* fin, const void* emb, int64_t row, float* out) override {
    m_.logits_row(t(fin), t(emb), row, out);
  }
  bool set_decode(int pos) override { return m_.set_decode(pos); }

 private:
  static const T* t(const void* p) { return static_cast<const T*>(p); }
  cuda::DeviceGPT<T> m_;
};

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(const RankGpu& gpu, DType pt, MemoryTracker* tracker)
      : pt_(pt), device_(gpu.device), alloc_(tracker), name_(gpu.name) {
    // The device is selected before anything is allocated on it.
    GPT_CUDA_OK(cudaSetDevice(device_));
    GPT_CUDA_OK(cudaStreamCreate(&stream_));  // blocking: ordered after the legacy-stream zero fills
    mm_ = std::make_unique<cuda::Matmul>(&alloc_);
    arena_ = std::make_unique<DeviceArena>(&alloc_, stream_);
  }
  ~CudaBackend() override {
    if (stream_) cudaStreamSynchronize(stream_);
    arena_.reset();
    mm_.reset();
    alloc_.release_cached();
    if (stream_) cudaStreamDestroy(stream_);
  }
  Arena* arena() override { return arena_.get(); }
  std::unique_ptr<UnitModel> make_model(const ParamLayout& layout, const GPTOptions& opt) override {
    mm_->set_autotune(opt.gemm_autotune);
    if (pt_ == DType::kBF16) return std::make_unique<DeviceModel<bf16>>(layout, opt, &alloc_, mm_.get(), stream_);
    return std::make_unique<DeviceModel<float>>(layout, opt, &alloc_, mm_.get(), stream_);
  }
  void* stream() override { return stream_; }
  std::string device_name() const override { return name_; }
  int device_index() const override { return device_; }
  int64_t reserved_bytes() const override { return alloc_.reserved(); }
  std::unique_ptr<trace::DeviceMarks> make_trace_marks() override { return cuda::make_stream_marks(stream_); }
  std::string cudnn_attention_unavailable(int B, int T, int C, int NH, bool trains) override {
    if (pt_ != DType::kBF16) return "cuDNN's fused attention is bf16 (this run is fp32)";
    return cuda::cudnn_attention_unavailable(cuda::AttentionShape{B, T, C, NH}, trains);
  }
  std::string driver_compiled_code_note() const override { return cuda::driver_compiled_code_note(device_); }
  std::string tensor_core_attention_unavailable(int B, int T, int C, int NH) override {
    return pt_ == DType::kBF16 ? cuda::attention_tensor_cores_unavailable(cuda::AttentionShape{B, T, C, NH}) : "";
  }

 private:
  DType pt_;
  int device_ = 0;
  cuda::DeviceAllocator alloc_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::Matmul> mm_;
  std::unique_ptr<DeviceArena> arena_;
  std::string name_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_device_backend(const std::optional<RankGpu>& gpu, bool allow_sharing,
                                                   DType param_dtype, MemoryTracker* tracker) {
  if (!gpu) throw ConfigError(cuda::no_device_reason());
  if (std::string why = cuda::device_unusable_reason(gpu->device); !why.empty()) throw ConfigError(why);
  if (gpu->ranks > 1 && !allow_sharing)
    throw ConfigError(fmt::format("{} ranks on this node use the same GPU ({}, device {} here): launch one rank per "
                                  "GPU, or allow sharing (several ranks per GPU, MPI communicator)",
                                  gpu->ranks, gpu->name, gpu->device));
  return std::make_unique<CudaBackend>(*gpu, param_dtype, tracker);
}

std::optional<RankGpu> rank_gpu(MPI_Comm base) {
  const NodeLayout node = node_layout(base);
  const int gpus = cuda::device_count();
  RankGpu g;
  if (gpus > 0) {
    g.device = pick_gpu(node.local_rank, gpus);
    const cuda::DeviceInfo info = cuda::device_info(g.device);
    g.name = info.name;
    g.uuid = info.uuid;
    g.memory = info.memory;
    g.sms = info.sms;
  }
  g.ranks = ranks_on_node_with(base, g.uuid);  // every rank takes part, with a GPU or without
  if (gpus <= 0) return std::nullopt;
  return g;
}

}  // namespace gpt
