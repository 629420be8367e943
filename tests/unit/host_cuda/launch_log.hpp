// The emulated backend's record of its kernel launches, for the launch
// resource check (tests/gpu/launch_resources.sh, scripts/kernel_resources.py):
// the emulator cannot know what a launch costs on a real SM (registers,
// static shared memory), but ptxas does, and ptxas cannot know which block
// sizes and dynamic shared memory the launchers ask for, but the emulator
// does. With GPT_EMULATED_LAUNCH_LOG=DIR set, each process writes at exit
// DIR/launches.PID.txt: one line per kernel and launch configuration,
//   <kernel's mangled name> <threads per block> <dynamic smem bytes>
//   <the kernel's dynamic smem opt-in, 0 for none> <launches>
// The name is the symbol dladdr finds for the kernel's host function, which
// is mangled like nvcc's entry of the same __global__ function; the
// emulated executables are linked with -rdynamic so that dladdr sees it.
#pragma once

#include <cstddef>

namespace host_cuda {

// Counts one launch of `kernel` with `threads` threads per block and
// `smem_bytes` of dynamic shared memory, the kernel having opted into
// `opt_in_bytes` (cudaFuncAttributeMaxDynamicSharedMemorySize; 0: never).
// Thread-safe.
void record_launch(const void* kernel, unsigned threads, size_t smem_bytes, size_t opt_in_bytes);

}  // namespace host_cuda
