// CUDA device discovery, compiled only when the CUDA toolkit is present
// (GPT_HAVE_CUDA). The CUDA training backend builds on this.
#pragma once

#include <cstdint>
#include <string>

namespace gpt::cuda {

// Number of visible CUDA devices; 0 when the driver finds none (no throw).
int device_count();
// Why device_count() is 0, in one line that begins "no CUDA device" and
// names CUDA's error: none visible (CUDA_VISIBLE_DEVICES), or no NVIDIA
// driver, or one older than this build's CUDA runtime (versions given).
std::string no_device_reason();
// Marketing name of device i, e.g. "NVIDIA H100 80GB HBM3".
std::string device_name(int i);
// What the trainer needs of device i, from one property query.
struct DeviceInfo {
  std::string name;
  // cudaDeviceProp::totalGlobalMem, e.g. 79.2 GiB on an H100 80GB: the
  // CUDA context and NCCL take some of it.
  int64_t memory = 0;
  // 32 hex digits: the same physical GPU has the same one in every
  // process, whatever CUDA_VISIBLE_DEVICES numbers it there.
  std::string uuid;
  // cudaDeviceProp::multiProcessorCount: a MIG instance's share of its GPU.
  int sms = 0;
};
DeviceInfo device_info(int i);
// Why --device cuda cannot train on device i, in one line; "" when it can.
// The backend needs compute capability 8.0 or newer (bf16 tensor cores,
// cp.async), and this build must hold code the device runs: its own SM's,
// or PTX of an older architecture for the driver to compile. A build for
// "90" alone has none for an A100 (8.0), nor one for "80;90" for an
// RTX 5090 (12.0 runs the 9.0 PTX, after the driver compiles it once).
std::string device_unusable_reason(int i);
// This build's CUDA architectures (CMAKE_CUDA_ARCHITECTURES), e.g. "80 90 100".
std::string build_cuda_architectures();
// Where this build has no cubin for device i and its driver compiles the
// build's PTX for it instead (core/cuda_code.hpp: a 12.0 GPU and a build
// for 80;90;100), one line saying so; "" otherwise. The compiling happens
// as each kernel first loads, once per driver cache: a first start that
// seems to stall should not surprise anyone.
std::string driver_compiled_code_note(int i);

}  // namespace gpt::cuda
