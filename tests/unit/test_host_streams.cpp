// The host CUDA runtime's stream orders (tests/unit/host_cuda/host_streams.cpp):
// each keeps exactly the orderings CUDA promises and breaks every other one,
// which is what makes the emulated backend's tests fail on a missing event
// wait or synchronisation.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "host_cuda/host_streams.hpp"

namespace {

using host_cuda::StreamOrder;

// Work that appends its name to a log when it runs.
class HostStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    host_cuda::set_stream_order(StreamOrder::kLazy);
    ASSERT_EQ(cudaStreamCreate(&compute_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&event_), cudaSuccess);
  }
  void TearDown() override {
    cudaDeviceSynchronize();
    cudaEventDestroy(event_);
    cudaStreamDestroy(comm_);
    cudaStreamDestroy(compute_);
    host_cuda::set_stream_order(StreamOrder::kLazy);
  }
  void work(cudaStream_t s, std::string name) {
    host_cuda::enqueue(s, [this, name] { log_.push_back(name); });
  }
  void collective(cudaStream_t s, std::string name) {
    host_cuda::enqueue_collective(s, [this, name] { log_.push_back(name); });
  }
  using Log = std::vector<std::string>;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t event_ = nullptr;
  Log log_;
};

TEST_F(HostStreams, LazyWorkRunsOnlyWhenTheHostSynchronises) {
  float x = 1.f;
  ASSERT_EQ(cudaMemsetAsync(&x, 0, sizeof x, compute_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);
  EXPECT_EQ(x, 1.f);  // not yet: a host read without a synchronisation sees the old value
  EXPECT_EQ(cudaEventQuery(event_), cudaErrorNotReady);
  ASSERT_EQ(cudaEventSynchronize(event_), cudaSuccess);
  EXPECT_EQ(x, 0.f);
  EXPECT_EQ(cudaEventQuery(event_), cudaSuccess);
}

TEST_F(HostStreams, LazySynchronisationRunsOnlyWhatItNeeds) {
  work(compute_, "producer");
  work(comm_, "consumer without a wait");
  ASSERT_EQ(cudaStreamSynchronize(comm_), cudaSuccess);
  EXPECT_EQ(log_, (Log{"consumer without a wait"}));  // ran before the result it did not wait for
  ASSERT_EQ(cudaStreamSynchronize(compute_), cudaSuccess);
  EXPECT_EQ(log_, (Log{"consumer without a wait", "producer"}));
}

TEST_F(HostStreams, AnEventWaitOrdersTheStreams) {
  work(compute_, "producer");
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);
  work(compute_, "after the record");
  ASSERT_EQ(cudaStreamWaitEvent(comm_, event_, 0), cudaSuccess);
  work(comm_, "consumer");
  ASSERT_EQ(cudaStreamSynchronize(comm_), cudaSuccess);
  // The wait covers the work before the record, not what followed it.
  EXPECT_EQ(log_, (Log{"producer", "consumer"}));
}

TEST_F(HostStreams, AWaitIsOnTheRecordAtTheTimeOfTheWait) {
  work(compute_, "first");
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(comm_, event_, 0), cudaSuccess);
  work(compute_, "second");
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);  // re-recorded after the wait
  work(comm_, "consumer");
  ASSERT_EQ(cudaStreamSynchronize(comm_), cudaSuccess);
  EXPECT_EQ(log_, (Log{"first", "consumer"}));
}

TEST_F(HostStreams, TheLegacyStreamOrdersBlockingStreamsOnly) {
  work(compute_, "blocking before");
  work(comm_, "non-blocking before");
  work(nullptr, "legacy");
  work(compute_, "blocking after");
  work(comm_, "non-blocking after");
  ASSERT_EQ(cudaStreamSynchronize(comm_), cudaSuccess);
  EXPECT_EQ(log_, (Log{"non-blocking before", "non-blocking after"}));
  ASSERT_EQ(cudaStreamSynchronize(compute_), cudaSuccess);
  EXPECT_EQ(log_, (Log{"non-blocking before", "non-blocking after", "blocking before", "legacy", "blocking after"}));
}

TEST_F(HostStreams, SynchronousCopiesAndFreesWaitButMemsetsDoNot) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, sizeof(float)), cudaSuccess);  // asynchronous for device memory
  work(compute_, "kernel");
  EXPECT_TRUE(log_.empty());
  float host = 1.f;
  ASSERT_EQ(cudaMemcpy(&host, d, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, 0.f);
  EXPECT_EQ(log_, (Log{"kernel"}));  // a legacy-stream copy waits for earlier blocking-stream work
  work(comm_, "collective");
  ASSERT_EQ(cudaFree(d), cudaSuccess);  // synchronises the device
  EXPECT_EQ(log_, (Log{"kernel", "collective"}));
}

TEST_F(HostStreams, CollectivesRunInTheOrderTheyWereIssued) {
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  collective(comm_, "first collective");
  collective(other, "second collective");
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  EXPECT_EQ(log_, (Log{"first collective", "second collective"}));
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

TEST_F(HostStreams, EagerCommRunsNonBlockingWorkAsSoonAsItsWaitsAllow) {
  host_cuda::set_stream_order(StreamOrder::kEagerComm);
  work(compute_, "producer");
  work(comm_, "collective without a wait");
  EXPECT_EQ(log_, (Log{"collective without a wait"}));  // before the compute work issued first
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);
  work(compute_, "reads the collective's buffer");
  ASSERT_EQ(cudaStreamWaitEvent(comm_, event_, 0), cudaSuccess);
  work(comm_, "overwrites it");
  EXPECT_EQ(log_.size(), 1u);
  ASSERT_EQ(cudaStreamSynchronize(compute_), cudaSuccess);
  // The waiting collective ran the moment the record did, before the
  // compute work issued ahead of it.
  EXPECT_EQ(log_, (Log{"collective without a wait", "producer", "overwrites it", "reads the collective's buffer"}));
}

TEST_F(HostStreams, ProgramOrderRunsWorkWhenIssued) {
  host_cuda::set_stream_order(StreamOrder::kProgram);
  work(compute_, "a");
  work(comm_, "b");
  work(nullptr, "c");
  EXPECT_EQ(log_, (Log{"a", "b", "c"}));
}

TEST_F(HostStreams, EventQueryOfAnEventNeverRecordedIsComplete) {
  EXPECT_EQ(cudaEventQuery(event_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(comm_, event_, 0), cudaSuccess);  // a no-op, as in CUDA
  work(comm_, "runs");
  ASSERT_EQ(cudaStreamSynchronize(comm_), cudaSuccess);
  EXPECT_EQ(log_, (Log{"runs"}));
}

// What bench_gpu_train's phase breakdown relies on: the time between two
// records is the work queued between them, and the refusals are CUDA's.
TEST_F(HostStreams, ElapsedTimeSpansTheWorkBetweenTwoRecords) {
  cudaEvent_t end = nullptr, untimed = nullptr;
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1.f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, event_, end), cudaErrorInvalidResourceHandle);  // never recorded
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);
  host_cuda::enqueue(compute_, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  ASSERT_EQ(cudaEventRecord(end, compute_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, compute_), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, event_, end), cudaErrorNotReady);  // lazy: nothing has run yet
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // host time before the work runs: not counted
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, event_, end), cudaSuccess);
  EXPECT_GE(ms, 30.f);
  EXPECT_LT(ms, 75.f);  // the 50 ms the host waited first are not in it
  EXPECT_EQ(cudaEventElapsedTime(&ms, event_, untimed), cudaErrorInvalidResourceHandle);
  cudaEventDestroy(untimed);
  cudaEventDestroy(end);
}

}  // namespace
