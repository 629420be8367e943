// The compute stream's clock for --trace (core/trace.hpp's DeviceMarks): each
// training-loop span also records a pair of CUDA events on the stream, and
// once the GPU has passed both, the pair becomes a slice at the GPU's times
// on the lane "GPU compute stream", beside the host's slice of the same
// name (which times the enqueueing). The GPU's clock is mapped onto the
// trace's by one event the host waits for at the first mark of a trace.
//
// Marks are read in the order they were recorded (one stream: once one has
// not been reached, no later one has), at each begin() and at finish(), so
// the events in use stay about as many as the GPU runs behind the host;
// events are reused once read. Tracing only: an untraced run creates none.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "core/trace.hpp"

namespace gpt::cuda {

std::unique_ptr<trace::DeviceMarks> make_stream_marks(cudaStream_t stream);

}  // namespace gpt::cuda
