// Send/receive buffers for bench_comm, on the host or (NCCL) on the device,
// with upload/download of float patterns converted to the collective's dtype.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/communicator.hpp"

namespace gpt {

class BenchBuffers {
 public:
  BenchBuffers(bool device, size_t bytes);
  ~BenchBuffers();
  BenchBuffers(const BenchBuffers&) = delete;
  BenchBuffers& operator=(const BenchBuffers&) = delete;
  void* send() { return send_; }
  void* recv() { return recv_; }
  void upload(void* dst, const std::vector<float>& src, DType t);
  std::vector<float> download(const void* src, size_t count, DType t);
  void synchronize();  // device: wait for all queued work

 private:
  bool device_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

}  // namespace gpt
