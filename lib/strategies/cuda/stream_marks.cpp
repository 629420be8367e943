#include "strategies/cuda/stream_marks.hpp"

#include <deque>
#include <mutex>
#include <vector>

#include "core/cuda/host_wait.hpp"
#include "model/cuda/check.hpp"

namespace gpt::cuda {
namespace {

class StreamMarks final : public trace::DeviceMarks {
 public:
  explicit StreamMarks(cudaStream_t s) : s_(s), lane_(trace::lane("GPU compute stream")) {
    GPT_CUDA_OK(cudaEventCreate(&ref_));
  }
  ~StreamMarks() override {
    for (Mark& m : marks_) release(m);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
    cudaEventDestroy(ref_);
  }
  StreamMarks(const StreamMarks&) = delete;
  StreamMarks& operator=(const StreamMarks&) = delete;

  int begin(const char* name, const char* cat, int index) override {
    std::lock_guard lk(mu_);
    if (epoch_ != trace::epoch()) {
      // The GPU's clock against the trace's, once per trace.
      GPT_CUDA_OK(cudaEventRecord(ref_, s_));
      wait_event(ref_, "the trace's clock reference");
      ref_us_ = trace::now_us();
      epoch_ = trace::epoch();
    }
    read(false);
    Mark m{name, cat, index, take(), nullptr, false};
    GPT_CUDA_OK(cudaEventRecord(m.b, s_));
    marks_.push_back(m);
    return int(first_ + marks_.size() - 1);
  }

  // Called by ~Span, so it never throws: a mark whose end cannot be
  // recorded is left out (a failing CUDA call surfaces at the loop's next
  // checked one).
  void end(int token) override {
    std::lock_guard lk(mu_);
    if (token < 0 || size_t(token) < first_) return;
    Mark& m = marks_[size_t(token) - first_];
    try {
      cudaEvent_t e = take();
      if (cudaEventRecord(e, s_) == cudaSuccess) {
        m.e = e;
      } else {
        free_.push_back(e);
        m.dropped = true;
      }
    } catch (...) {
      m.dropped = true;
    }
  }

  void finish() override {
    std::lock_guard lk(mu_);
    read(true);
  }

 private:
  struct Mark {
    const char* name;
    const char* cat;
    int index;
    cudaEvent_t b, e;      // e: nullptr until the span has ended
    bool dropped = false;  // ended, but its end could not be recorded
  };

  cudaEvent_t take() {
    if (free_.empty()) {
      cudaEvent_t e = nullptr;
      GPT_CUDA_OK(cudaEventCreate(&e));
      return e;
    }
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  void release(Mark& m) {
    if (m.b) free_.push_back(m.b);
    if (m.e) free_.push_back(m.e);
    m.b = m.e = nullptr;
  }

  // Records the slices of the oldest marks the GPU has passed (all of them,
  // waiting for the GPU, when `all`): a mark is read once its span has
  // ended and its end event is reached; spans nest, so an open one keeps
  // the marks after it too.
  void read(bool all) {
    while (!marks_.empty()) {
      Mark& m = marks_.front();
      if (!m.e) {
        if (!all && !m.dropped) return;
        release(m);  // still open at the end of the trace, or its end not recorded: left out
      } else {
        if (all) wait_event(m.e, "the trace's last marks");
        const cudaError_t q = cudaEventQuery(m.e);
        if (q == cudaErrorNotReady) return;
        GPT_CUDA_OK(q);
        float b = 0, d = 0;
        GPT_CUDA_OK(cudaEventElapsedTime(&b, ref_, m.b));
        GPT_CUDA_OK(cudaEventElapsedTime(&d, m.b, m.e));
        trace::record({m.name, m.cat, m.index, lane_, false, 0, ref_us_ + 1e3 * double(b), 1e3 * double(d), -1});
        release(m);
      }
      marks_.pop_front();
      ++first_;
    }
  }

  std::mutex mu_;  // lane 0 is the training loop's, but a Span may end on whichever thread made it
  cudaStream_t s_;
  int lane_;
  cudaEvent_t ref_ = nullptr;
  double ref_us_ = 0;
  uint64_t epoch_ = 0;
  std::deque<Mark> marks_;  // recorded, not yet read, oldest first; token = first_ + position
  size_t first_ = 0;        // token of marks_.front()
  std::vector<cudaEvent_t> free_;
};

}  // namespace

std::unique_ptr<trace::DeviceMarks> make_stream_marks(cudaStream_t stream) {
  return std::make_unique<StreamMarks>(stream);
}

}  // namespace gpt::cuda
