#!/usr/bin/env bash
# Every GPU check in one call of the `run` device tool, within a deadline:
# a lease is short (minutes of device time, each start costs one or two), and
# a call returns at most 8 files from $OUT. Runs the named steps in this
# order (whatever order they are named in), each cut off at the deadline:
#   ops      the GPU-only build and the op/model tests (always built: the
#            other steps use it); with `full` named, the full build (Open MPI,
#            HDF5; CPU-bound) runs niced beside them;
#   full     the trainer's GPU tests (strategies on ranks sharing the GPU,
#            NCCL on 1 rank) from the full build, once it is built: before
#            the timed steps, so they have the machine and a short lease
#            still runs these tests;
#   bench    bench/gpu_vs_torch.sh (ours against PyTorch eager and compiled);
#   profile  bench/gpu_kernel_profile.sh (ncu: each kernel's time in a step);
#   variants bench/gpu_attention_variants.sh (the dK/dV kernel's 2 and 3
#            blocks per SM crossed with the dQ kernel's 3 and 4, timed one
#            after the other; four builds of bench_gpu_attention: over 320 s
#            on an H100 machine, so after the tests);
#   stalls   bench/gpu_kernel_stalls.sh (ncu's stall reasons and occupancy
#            for one launch of each tensor-core attention kernel);
#   memcheck compute-sanitizer memcheck over the op tests.
# $OUT gets summary.txt (each step's exit status and seconds, the GPU, the
# tables), the benchmark's JSON, and logs.tgz (every log; refreshed every
# 20 s, so a call cut off at its limit still brings back what ran).
# The device tool's copy of .git may report a stale HEAD: pass the commit
# measured as GPT_GIT_REVISION=$(git rev-parse --short HEAD) (taken here)
# for the benchmark's JSON.
#   scripts/gpu_lease.sh [SECONDS] [STEP...]   (default 480 ops bench full memcheck)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
final="${OUT:?set OUT: the folder whose files come back}"
budget="${1:-480}"; shift $(( $# > 0 ? 1 : 0 ))
steps=" ${*:-ops bench full memcheck} "
wants() { [[ "$steps" == *" $1 "* ]]; }
logs=/tmp/gpu_lease; rm -rf "$logs"; mkdir -p "$logs"
left() { echo $(( budget - SECONDS )); }
pack() { tar czf "$final/logs.tmp" -C "$logs" . 2>/dev/null && mv -f "$final/logs.tmp" "$final/logs.tgz"; }
note() { echo "$*" | tee -a "$final/summary.txt"; }
# step NAME CMD...: runs CMD with the time left, logging to $logs/NAME.out.
step() {
  local name="$1"; shift
  local t0=$SECONDS lim; lim="$(left)"
  if [ "$lim" -lt 20 ]; then note "$name: skipped (deadline)"; return 1; fi
  timeout -k 5 "$lim" "$@" > "$logs/$name.out" 2>&1
  local rc=$?
  note "$name: rc=$rc in $(( SECONDS - t0 )) s$([ "$rc" = 124 ] && echo ' (cut off at the deadline)')"
  tail -n 25 "$logs/$name.out"
  return "$rc"
}
(while sleep 20; do pack; done) & packer=$!
trap 'kill $packer 2>/dev/null; pack' EXIT
note "gpu_lease: ${GPT_GIT_REVISION:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null)} budget ${budget} s"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$final/summary.txt"
# The GPUs and MIG instances this machine shows (a MIG instance: MFU against its share of the GPU).
nvidia-smi -L | tee -a "$final/summary.txt"
export OUT="$logs"
full=""
if wants full; then
  ( sleep 5; nice -n 19 "$root/scripts/gpu_verify.sh" full-build > "$logs/full-build.out" 2>&1
    echo "rc=$?" >> "$logs/full-build.out" ) & full=$!
fi
# cuDNN's own error log (to stderr, so into the tests' output) for the op tests: a cuDNN plan or execution that
# fails there says why in the same call (the benchmark runs without it).
CUDNN_LOGLEVEL_DBG=1 CUDNN_LOGDEST_DBG=stderr step ops "$root/scripts/gpu_verify.sh" ops
grep -E 'tests passed|tests failed|Failed|Not Run|\*\*\*' "$logs/ops-ctest.log" 2>/dev/null | head -n 40 |
  tee -a "$final/summary.txt"
# The trainer's GPU tests next, before the timed steps: they are what a
# lease must not miss (the benchmark has run at earlier commits), and the
# timed steps want the machine to themselves, so they run after the build.
if [ -n "$full" ]; then
  t0=$SECONDS
  while kill -0 "$full" 2>/dev/null && [ "$(left)" -gt 20 ]; do sleep 2; done
  if kill -0 "$full" 2>/dev/null; then
    note "full-build: still running after $(( SECONDS - t0 )) s of waiting (deadline)"
  else
    note "full-build: $(tail -n 1 "$logs/full-build.out") after $(( SECONDS - t0 )) s of waiting"
  fi
  step full-test "$root/scripts/gpu_verify.sh" full-test
  grep -E 'tests passed|tests failed|Failed|Not Run' "$logs/full-ctest.log" 2>/dev/null | head -n 30 |
    tee -a "$final/summary.txt"
fi
if wants bench; then
  step bench "$root/scripts/gpu_verify.sh" bench
  awk '/^# impl /{table=1} table' "$logs/bench.out" | head -n 130 >> "$final/summary.txt"  # the tables, from the rows on
  cp "$logs"/gpu-*.json "$final/" 2>/dev/null
fi
if wants profile; then
  # Compared per kernel family with the last committed profile (update this when a newer one is committed).
  BASELINE="$root/bench/results/gpu-kernels-nvidia-h100-80gb-hbm3-2026-11-27-caf4ecc.json" \
    step profile "$root/bench/gpu_kernel_profile.sh" "$root/build-gpu"
  grep -v '^{' "$logs/profile.out" | head -n 80 >> "$final/summary.txt"
fi
if wants variants; then
  step variants "$root/bench/gpu_attention_variants.sh" "$root/build-gpu"
  grep -A5 '^# dK/dV blocks' "$logs/variants.out" >> "$final/summary.txt"
fi
if wants stalls; then
  step stalls "$root/bench/gpu_kernel_stalls.sh" "$root/build-gpu"
  grep -E '^## |Duration|Registers Per|Achieved Occupancy|Stall|Issued Warp|No Eligible|Eligible Warps' \
    "$logs/stalls.out" | head -n 60 >> "$final/summary.txt"
fi
if wants memcheck; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 3 "$root/build-gpu/tests/test_cuda_ops"
fi
note "gpu_lease: done at $SECONDS s"
