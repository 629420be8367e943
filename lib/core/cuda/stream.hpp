// An owning CUDA stream. Blocking (cudaStreamCreate): its work runs after
// earlier work on the legacy default stream, which the backend's
// synchronous zero fills of new buffers use. Declare it before the objects
// that enqueue on it, so that it is destroyed after them: the device model
// and the buffers synchronise or free on their stream when destroyed, and a
// destroyed stream's handle must not be used.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gpt::cuda {

class Stream {
 public:
  Stream() {
    const cudaError_t e = cudaStreamCreate(&s_);
    if (e != cudaSuccess) throw std::runtime_error(std::string("cudaStreamCreate: ") + cudaGetErrorString(e));
  }
  ~Stream() { cudaStreamDestroy(s_); }  // CUDA lets queued work finish first
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace gpt::cuda
