// The host CUDA runtime's stream orders (tests/unit/host_cuda/host_streams.cpp):
// each keeps exactly the orderings CUDA promises and breaks every other one,
// which is what makes the emulated backend's tests fail on a missing event
// wait or synchronisation.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
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

TEST_F(HostStreams, AnEventAskedAgainRunsTheWorkBeforeItsRecord) {
  work(compute_, "before");
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);
  work(compute_, "after");
  EXPECT_EQ(cudaEventQuery(event_), cudaErrorNotReady);  // lazy: the first answer
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(cudaEventQuery(event_), cudaSuccess);  // a host that keeps polling sees it finish
  EXPECT_EQ(log_, (Log{"before"}));
  ASSERT_EQ(cudaEventRecord(event_, compute_), cudaSuccess);  // a new record is asked about afresh
  EXPECT_EQ(cudaEventQuery(event_), cudaErrorNotReady);
  EXPECT_EQ(log_, (Log{"before"}));
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

// A collective that never finishes (GPT_EMULATED_NCCL_FAULT): nothing
// queued after it or waiting for it runs; a query answers not ready, as on a
// GPU; destroying a stream does not wait; each call that would block the
// host forever on a GPU ends the process instead, naming itself. In a child
// process (a death test): the stuck collective stays stuck for the rest of
// the process. A wrong answer before the synchronisation exits 0, which
// fails the death test.
void stuck_then(const std::function<void(cudaStream_t, cudaEvent_t)>& synchronise, StreamOrder order) {
  host_cuda::set_stream_order(order);
  cudaStream_t compute = nullptr, comm = nullptr, spare = nullptr;
  cudaEvent_t done = nullptr;
  cudaStreamCreate(&compute);
  cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking);
  cudaStreamCreate(&spare);
  cudaEventCreate(&done);
  bool before = false, after = false, waiting = false, independent = false, reached = false;
  host_cuda::enqueue_collective(comm, [&] { before = true; });
  host_cuda::enqueue_stuck_collective(comm, [&] { reached = true; });
  // Lazy: the GPU gets to it only when the host asks (the host NCCL's
  // asynchronous error appears then, not when it is issued).
  if (order == StreamOrder::kLazy && reached) std::exit(0);
  host_cuda::enqueue_collective(spare, [&] { after = true; });  // later collectives queue behind it
  cudaEventRecord(done, comm);
  cudaStreamWaitEvent(compute, done, 0);
  host_cuda::enqueue(compute, [&] { waiting = true; });
  cudaStream_t free_stream = nullptr;
  cudaStreamCreate(&free_stream);
  host_cuda::enqueue(free_stream, [&] { independent = true; });
  const bool answers = cudaStreamQuery(comm) == cudaErrorNotReady && cudaStreamQuery(compute) == cudaErrorNotReady &&
                       cudaStreamQuery(spare) == cudaErrorNotReady && cudaEventQuery(done) == cudaErrorNotReady &&
                       cudaEventQuery(done) == cudaErrorNotReady &&  // asked again: still not
                       cudaStreamQuery(free_stream) == cudaSuccess && cudaStreamDestroy(free_stream) == cudaSuccess;
  if (!answers || !before || after || waiting || !independent || !reached) std::exit(0);
  synchronise(compute, done);
  std::exit(0);  // the synchronisation returned: wrong
}

TEST(HostStreamsStuck, QueriesAnswerNotReadyAndEachBlockingCallEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* hangs = "waits for a collective that never finishes .GPT_EMULATED_NCCL_FAULT.: on a GPU this process would hang here";
  for (StreamOrder order : {StreamOrder::kLazy, StreamOrder::kEagerComm, StreamOrder::kProgram}) {
    SCOPED_TRACE(int(order));
    EXPECT_DEATH(stuck_then([](cudaStream_t, cudaEvent_t) { cudaDeviceSynchronize(); }, order),
                 std::string("cudaDeviceSynchronize ") + hangs);
    EXPECT_DEATH(stuck_then([](cudaStream_t s, cudaEvent_t) { cudaStreamSynchronize(s); }, order),
                 std::string("cudaStreamSynchronize ") + hangs);
    EXPECT_DEATH(stuck_then([](cudaStream_t, cudaEvent_t e) { cudaEventSynchronize(e); }, order),
                 std::string("cudaEventSynchronize ") + hangs);
    EXPECT_DEATH(stuck_then(
                     [](cudaStream_t, cudaEvent_t) {
                       float x = 0, y = 0;
                       cudaMemcpy(&y, &x, sizeof x, cudaMemcpyHostToHost);
                     },
                     order),
                 std::string("cudaMemcpy ") + hangs);
    EXPECT_DEATH(stuck_then(
                     [](cudaStream_t, cudaEvent_t) {
                       void* p = nullptr;
                       cudaMalloc(&p, 16);
                       cudaFree(p);
                     },
                     order),
                 std::string("cudaFree ") + hangs);
  }
}

}  // namespace
