#!/usr/bin/env bash
# Launch resources of the CUDA backend, without a GPU (ctest
# emulated.launch_resources): runs the op tests (every head size), the fast
# model tests and short trainer runs (bf16 and fp32, head sizes 32 and 64)
# on the emulated backend, which logs every kernel's
# block size and dynamic shared memory, then checks those launches against ptxas's register and shared memory
# counts for each architecture's PTX (scripts/kernel_resources.py): a launch
# a real SM would refuse, a kernel no test launches, or a spill in the
# training path fails. Prints the per-kernel occupancy table; the JSON
# report is WORK_DIR/kernel_resources.json.
#   launch_resources.sh BUILD_DIR WORK_DIR PTXAS OPS_TEST MODEL_TEST TRAINER ARCH=PTX[:PTX...]...
set -euo pipefail
build="$1"; work="$2"; ptxas="$3"; ops="$4"; model="$5"; trainer="$6"; shift 6
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
rm -rf "$work"
mkdir -p "$work/logs"
export GPT_EMULATED_LAUNCH_LOG="$work/logs"
step() {  # NAME COMMAND...
  local name="$1"; shift
  "$@" > "$work/$name.log" 2>&1 || { echo "FAILED: $name"; cat "$work/$name.log"; exit 1; }
}
step ops "$ops"
# The trajectory tests launch nothing the others do not, 20 times over.
step model "$model" --gtest_filter=-*Trajectory*
"$here/../make_tiny_run.sh" "$build" "$work"
train=("$root/scripts/mpirun.sh" -np 1 "$trainer" --config "$work/tiny.toml" --steps 2 --device cuda)
step train_bf16_hs32 "${train[@]}" --n-head 2
step train_bf16_hs64 "${train[@]}" --n-head 1
step train_fp32_hs32 "${train[@]}" --n-head 2 --precision fp32
step train_fp32_hs64 "${train[@]}" --n-head 1 --precision fp32
unset GPT_EMULATED_LAUNCH_LOG

# Spills allowed: the SIMT attention kernels serve fp32 runs (and bf16 where
# the tensor-core kernels cannot: unaligned pointers), not bf16 training; at
# head size 64 their one-warp backward blocks keep 64-wide rows per lane.
# The tensor-core attention runs only where a block may have its shared
# memory (attention_tensor_core_ok, and the backward's choice of buffers):
# at head size 128 on 8.6, 8.9 and 12.0 the forward and the single-buffered
# backward, not the double-buffered one, which the check lists as not run
# there. The probe kernel is never launched: the start-up check asks CUDA
# for its attributes (core/cuda/device_query.hpp device_unusable_reason).
python3 "$root/scripts/kernel_resources.py" --ptxas "$ptxas" --logs "$work/logs" \
  --json "$work/kernel_resources.json" --spill-ok '^simt::' --smem-gated '^tc::' --unlaunched '::probe_kernel$' "$@"
