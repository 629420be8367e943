// Bounded host waits for the GPU (host_wait.hpp).
#include "core/cuda/host_wait.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace gpt::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(fmt::format("CUDA error waiting for the GPU ({}): {}", what, cudaGetErrorString(e)));
}
// Polls query() (cudaStreamQuery or cudaEventQuery) under the watchdog, or
// calls block() when it is idle.
template <typename Query, typename Block>
void bounded_wait(Query query, Block block, const char* what) {
  const Watchdog& w = watchdog();
  if (w.idle()) return check(block(), what);
  wait_until(
      [&] {
        const cudaError_t e = query();
        if (e == cudaErrorNotReady) return false;
        check(e, what);
        return true;
      },
      w, {"the GPU", what});
}

}  // namespace

void wait_stream(cudaStream_t s, const char* what) {
  bounded_wait([s] { return cudaStreamQuery(s); }, [s] { return cudaStreamSynchronize(s); }, what);
}

void wait_event(cudaEvent_t e, const char* what) {
  bounded_wait([e] { return cudaEventQuery(e); }, [e] { return cudaEventSynchronize(e); }, what);
}

}  // namespace gpt::cuda
