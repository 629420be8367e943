#!/usr/bin/env bash
# GPU verification on a machine with a GPU, CUDA and CMake but none of our
# Debian packages (the `run` device tool's machine). Run from the repository
# root after scripts/device_carry.sh has filled .carry/ on the build machine
# (carry .carry with the run). Steps, each independent of the next:
#   1. GPU-only build (no MPI, no HDF5) and the gpu-labelled op/model tests;
#   2. the single-GPU benchmark vs PyTorch eager/compile (its JSON in the
#      logs' folder; with the full build there, a gpt_train row too);
#   3. the full build against the carried Open MPI/HDF5 and the trainer's
#      GPU test (every strategy on 1/2/4 ranks sharing the GPU, NCCL on 1);
#      full-build and full-test run its two halves apart (scripts/gpu_lease.sh
#      builds while the op tests hold the GPU);
#   sanitize (not in all): the op tests under compute-sanitizer: memcheck
#      (out-of-bounds and misaligned accesses) and racecheck (shared-memory
#      hazards, what the emulator's schedule can only provoke, not observe).
# Logs go to ${OUT:-runs/gpu_verify}/.
#   scripts/gpu_verify.sh [ops|bench|full|full-build|full-test|sanitize|all] (default all)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
what="${1:-all}"
out="${OUT:-$root/runs/gpu_verify}"; mkdir -p "$out"
carry="$root/.carry"
# The GPU's own architecture (nvidia-smi's compute capability: 9.0 -> 90),
# unless CUDA_ARCH says; 90 where it cannot tell.
arch="${CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')}"
[[ "$arch" =~ ^[0-9]+$ ]] || arch=90
jobs="$(nproc)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
nvcc --version | tail -n 2 | tee -a "$out/gpu.txt"
rc=0
# A library the toolkit lacks, from PyTorch's pip wheels: the folder above
# the first include/HEADER under the nvidia package ("" if none). The
# wheels' layout differs between releases (nvidia/nccl/, nvidia/cu13/).
pip_root() {
  local base h
  for base in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
    h="$(find "$base" -path "*include/$1" 2>/dev/null | head -n 1)"
    [ -n "$h" ] && { dirname "$(dirname "$h")"; return; }
  done
}
# NCCL: the toolkit's, or else the one PyTorch's wheels bring (nvidia-nccl).
nccl_root=()
if ! ls /usr/local/cuda/include/nccl.h > /dev/null 2>&1; then
  pip_nccl="$(pip_root nccl.h)"
  [ -n "$pip_nccl" ] && nccl_root=(-DNCCL_ROOT="$pip_nccl")
  echo "NCCL: ${pip_nccl:-not found (the NCCL communicator will be left out)}" | tee -a "$out/gpu.txt"
fi
# cuDNN (its fused attention, --attention cudnn): the toolkit's, or else the
# one the wheels bring (nvidia-cudnn: headers, and libcudnn.so.9, which the
# program opens when asked for it: LD_LIBRARY_PATH).
cudnn_root=()
if ! ls /usr/local/cuda/include/cudnn_graph.h > /dev/null 2>&1; then
  pip_cudnn="$(pip_root cudnn_graph.h)"
  if [ -n "$pip_cudnn" ]; then
    cudnn_root=(-DCUDNN_ROOT="$pip_cudnn")
    export LD_LIBRARY_PATH="$pip_cudnn/lib:${LD_LIBRARY_PATH:-}"
  fi
  echo "cuDNN: ${pip_cudnn:-not found (the cuDNN attention will be left out)}" | tee -a "$out/gpu.txt"
fi

if [ "$what" = ops ] || [ "$what" = bench ] || [ "$what" = sanitize ] || [ "$what" = all ]; then
  cmake -S "$root" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release -DGPT_GPU_OPS_ONLY=ON "${cudnn_root[@]}" \
    -DGPT_CARRY_DIR="$carry" -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$out/ops-configure.log" 2>&1 &&
    cmake --build "$root/build-gpu" -j "$jobs" > "$out/ops-build.log" 2>&1 || { echo "ops build failed"; tail -30 "$out/ops-build.log"; exit 1; }
fi
if [ "$what" = ops ] || [ "$what" = all ]; then
  (cd "$root/build-gpu" && ctest -L gpu --timeout 300 --output-on-failure) 2>&1 | tee "$out/ops-ctest.log" | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  # What this GPU's cuBLASLt computes in its GELU epilogues (the Matmul's
  # check: fused only if it is GPT-2's GELU) and in its bias-gradient one
  # (BGRADB: used only if exact at the check), for the record.
  "$root/build-gpu/tests/test_cuda_ops" --gtest_filter='*GeluEpilogueVerdict*:*BiasGradientEpilogue*' 2>&1 |
    grep -E 'cuBLASLt GELU|bias-gradient epilogue' | sort -u | tee -a "$out/gpu.txt"
  # Which kernels and workspaces this machine's cuDNN plans for an H100 and an
  # A100 without using the GPU (test_cudnn_attention: the same checks as on
  # the CPU machine, against the cuDNN found here), for the record.
  (cd "$root/build-gpu" && ctest -R '^CudnnAttention\.' -V --timeout 120) > "$out/ops-cudnn-plans.log" 2>&1
  grep -E 'cuDNN 9|B=16 T=1024|Test +#' "$out/ops-cudnn-plans.log" | sed 's/^[0-9]*: //' |
    tee -a "$out/gpu.txt"
fi
if [ "$what" = sanitize ]; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 3 "$root/build-gpu/tests/test_cuda_ops" > "$out/sanitize-$tool.log" 2>&1 ||
      { echo "compute-sanitizer $tool: failed"; rc=1; }
    tail -n 5 "$out/sanitize-$tool.log"
  done
fi
# Open MPI, HDF5 and PCRE2 from the carried Debian tree, relocated: they
# were built for /usr (OPAL_PREFIX and PMIX_INSTALL_PREFIX move Open MPI's
# and PMIx's plugin and help paths; LD_LIBRARY_PATH finds the libraries).
prefix="$carry/prefix/usr"
carried_mpi() {
  local lib="$prefix/lib/x86_64-linux-gnu"
  export PATH="$prefix/bin:$PATH" OPAL_PREFIX="$prefix" PMIX_INSTALL_PREFIX="$lib/pmix2"
  export LD_LIBRARY_PATH="$lib:$lib/openmpi/lib:${LD_LIBRARY_PATH:-}"
}
if [ "$what" = bench ] || [ "$what" = all ]; then
  # With the full build there, the trainer itself gets a row too (gpt_train on 1 rank).
  (if [ -x "$root/build-gpu-full/apps/gpt_train" ]; then
     carried_mpi; export TRAINER="$root/build-gpu-full/apps/gpt_train"
   fi
   RESULTS_DIR="$out" "$root/bench/gpu_vs_torch.sh" "$root/build-gpu") 2>&1 | tee "$out/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
case "$what" in full|all) full_build=1; full_test=1 ;; full-build) full_build=1; full_test=0 ;;
  full-test) full_build=0; full_test=1 ;; *) full_build=0; full_test=0 ;; esac
if [ "$full_build" = 1 ] || [ "$full_test" = 1 ]; then
  carried_mpi
  if [ "$full_build" = 1 ]; then
    cmake -S "$root" -B "$root/build-gpu-full" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
      -DGPT_CARRY_DIR="$carry" -DGPT_CARRY_PREFIX="$prefix" "${nccl_root[@]}" "${cudnn_root[@]}" \
      > "$out/full-configure.log" 2>&1 &&
      cmake --build "$root/build-gpu-full" -j "$jobs" > "$out/full-build.log" 2>&1 ||
      { echo "full build failed: see $out/full-*.log"; tail -n 20 "$out"/full-*.log; rc=1; }
  fi
  if [ "$full_test" = 1 ] && [ ! -x "$root/build-gpu-full/apps/gpt_train" ]; then
    echo "full tests: no full build in $root/build-gpu-full (run full-build first)"; rc=1
  fi
  if [ "$full_test" = 1 ] && [ "$rc" = 0 ]; then
    # Where the op tests already ran into this folder (the GPU-only build's
    # test_cuda_ops, the same code), their suites are not run a second time:
    # a lease's minutes go to the trainer's tests. Their names come from the
    # binary, so a suite added later is left out too.
    skip_ops=()
    if [ -f "$out/ops-ctest.log" ]; then
      suites="$("$root/build-gpu-full/tests/test_cuda_ops" --gtest_list_tests 2>/dev/null |
        sed -n 's#^\([A-Za-z0-9_]*\)\(/[0-9]*\)\{0,1\}\..*#\1#p' | sort -u | paste -sd'|')"
      [ -n "$suites" ] && skip_ops=(-E "^($suites)\\.") && echo "full tests: the op tests' suites ran in ops ($suites)"
    fi
    (cd "$root/build-gpu-full" && ctest -L gpu "${skip_ops[@]}" --timeout 300 --output-on-failure) 2>&1 |
      tee "$out/full-ctest.log" | tail -40
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "full tests failed: see $out/full-ctest.log"; rc=1; }
  fi
fi
exit $rc
