// Asynchronous global-to-shared copies (PTX cp.async, sm_80+): a thread
// issues 16-byte copies, closes them into a group (commit), and before
// reading their destinations waits until at most N of its groups are still
// in flight (wait<N>); a __syncthreads() after the wait makes every thread's
// copies visible to the block. Kernels use it to load the next tile while
// computing on the current one.
//
// Under tests/unit/emulated_cuda.hpp the copies are the emulator's: held
// back until the wait that covers them (the latest a GPU may complete them),
// so a read before the wait sees the poisoned shared memory, and a copy
// never waited for fails the launch.
#pragma once

namespace gpt::cuda::detail {

// dst (shared) and src (global) 16-byte aligned.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
#ifdef GPT_EMULATED_CUDA
  emulated_cuda::cp_async_16(dst, src);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
#endif
}

// Zeroes dst's 16 bytes (shared) in place of a cp_async_16 this thread
// skips (a row past the end) while others of its warp issue theirs: a plain
// store. The emulator also counts it as this thread's next copy, so that the
// n-th copies of a warp's threads stay one instruction for its bank-conflict
// count, as the GPU's predicated copy is.
__device__ __forceinline__ void cp_async_zero_16(void* dst) {
#ifdef GPT_EMULATED_CUDA
  emulated_cuda::cp_async_zero_16(dst);
#else
  *static_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifdef GPT_EMULATED_CUDA
  emulated_cuda::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// "memory": the compiler must not move shared-memory reads above the wait.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifdef GPT_EMULATED_CUDA
  emulated_cuda::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

}  // namespace gpt::cuda::detail
