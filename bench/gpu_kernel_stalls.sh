#!/usr/bin/env bash
# Why a kernel takes the time it does: Nsight Compute's speed-of-light,
# occupancy, scheduler and warp-state (stall reason) sections for one launch
# of each attention kernel at the benchmark's shape (bench_gpu_attention,
# tensor cores, after 3 warm-up launches of each), printed as ncu's details
# page. Read next to bench/gpu_kernel_profile.sh (where the time goes) and
# bench/kernel_loop_ptx.py (what a loop iteration issues).
#   bench/gpu_kernel_stalls.sh [BUILD_DIR] [KERNEL_REGEX] [bench_gpu_attention flags...]
#   (default regex: the tensor-core attention kernels, tc::forward|dkv|dq)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; regex="${2:-(forward|dkv|dq)_kernel}"
shift $(( $# < 2 ? $# : 2 ))
command -v ncu > /dev/null || { echo "gpu_kernel_stalls: ncu (Nsight Compute) not found on PATH" >&2; exit 2; }
bench="$build/bench/bench_gpu_attention"
[ -x "$bench" ] || { echo "gpu_kernel_stalls: $bench: not built" >&2; exit 2; }
for kernel in forward dkv dq; do
  [[ "$kernel" =~ $regex || "${kernel}_kernel" =~ $regex ]] || continue
  echo "## ${kernel}_kernel"
  # The tensor-core kernels launch first (bench_gpu_attention times them
  # before the CUDA-core ones, whose names also contain NAME_kernel): the
  # 4th match is the tensor-core kernel's first timed launch.
  ncu --clock-control none --kernel-name "regex:${kernel}_kernel" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section LaunchStats "$bench" --iters 1 "$@" | grep -v '^{'
done
