#!/usr/bin/env bash
# ctest cmake.local_gpu_configure: configuring on a machine whose GPU the
# default CUDA architectures have no code for adds its architecture (a
# stand-in nvidia-smi reports the GPU); one they cover, no GPU, no driver,
# -DGPT_CUDA_LOCAL_GPU=OFF or architectures given by the user add nothing.
# Configures only (the GPU-only tree, no tests or benchmarks: seconds).
#   local_gpu_configure.sh SOURCE_DIR WORK_DIR NVCC GENERATOR
set -euo pipefail
src="$1"; work="$2"; nvcc="$3"; generator="$4"
knows() { "$nvcc" --list-gpu-arch | grep -qx "compute_$1"; }  # an architecture is added where nvcc has it
rm -rf "$work"; mkdir -p "$work/bin"
smi="$work/bin/nvidia-smi"
configure() {  # NAME [CMAKE ARGS...]: prints the architectures configure reports
  local name="$1"; shift
  PATH="$work/bin:$PATH" cmake -S "$src" -B "$work/$name" -G "$generator" -DGPT_GPU_OPS_ONLY=ON -DGPT_TESTS=OFF \
    -DGPT_BENCH=OFF "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  sed -n 's/^-- gpt: CUDA=ON (architectures: \([^)]*\)).*/\1/p' "$work/$name.log"
}
expect() {  # WHAT GOT WANT
  [[ "$2" == "$3" ]] || { echo "FAIL: $1: architectures '$2', expected '$3'"; exit 1; }
  echo "ok: $1: $2"
}
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' > "$smi"
chmod +x "$smi"
defaults="$(configure no_driver)"
[[ "$defaults" == 80\;90* ]] || { echo "FAIL: defaults '$defaults' do not start with 80;90"; exit 1; }
echo "ok: no driver: $defaults"
printf '#!/bin/sh\necho 12.0\n' > "$smi"
got="$(configure rtx50)"
if knows 120; then
  expect "a 12.0 GPU" "$got" "$defaults;120"
  grep -q "adding CUDA architectures 120 for this machine's GPU" "$work/rtx50.log" || { echo "FAIL: no line saying so"; exit 1; }
else
  expect "a 12.0 GPU, which this nvcc cannot build for" "$got" "$defaults"
fi
expect "a 12.0 GPU, -DGPT_CUDA_LOCAL_GPU=OFF" "$(configure rtx50_off -DGPT_CUDA_LOCAL_GPU=OFF)" "$defaults"
expect "a 12.0 GPU, the user's architectures" "$(configure rtx50_user -DCMAKE_CUDA_ARCHITECTURES=90)" "90"
printf '#!/bin/sh\necho 9.0\necho 9.0\n' > "$smi"
expect "two H100s" "$(configure h100)" "$defaults"
printf '#!/bin/sh\necho 8.9\n' > "$smi"
expect "an L40S (the sm_80 code runs)" "$(configure l40s)" "$defaults"
printf '#!/bin/sh\necho 12.1\n' > "$smi"
knows 121 && want="$defaults;121" || want="$defaults"
expect "a DGX Spark" "$(configure spark)" "$want"
