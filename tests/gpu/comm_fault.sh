#!/usr/bin/env bash
# A collective that never finishes (ctest emulated.comm_fault): every rank
# must end with a one-line error and a non-zero exit, never hang. On a GPU
# that is a network failure, or a peer that stopped, while NCCL's kernels
# wait; the host only notices through --comm-timeout or NCCL's asynchronous
# error (core/cuda/host_wait.hpp). Here the host NCCL makes the job's N-th
# collective never finish on every rank (GPT_EMULATED_NCCL_FAULT, see
# tests/unit/host_cuda/host_nccl.cpp), and any host call that would then
# block forever on a GPU (cudaStreamSynchronize, cudaEventSynchronize, a
# synchronous copy, cudaFree, ncclCommDestroy) ends the process with
# "host CUDA runtime: ... would hang here" instead; or it makes one rank's
# host stop there while the others' collective never finishes. So each run
# checks that:
#  * the job exits non-zero, well within the run's limit;
#  * it says why in the expected one-line error (the timeout naming the
#    wait, or NCCL's error naming the rank);
#  * no rank reached a wait that would hang: neither in the training loop
#    (every wait bounded), nor after the error (gpt_train does not tear
#    down GPU state that waits for the stuck collective);
#  * the timeout took at least --comm-timeout.
# The sweep puts the fault at 10 points spread over a whole zero3 run with
# gradient accumulation, validation, samples and checkpoints, counted from
# a healthy run's collectives. Prints a row per run.
#   comm_fault.sh BUILD_DIR WORK_DIR EMULATED_TRAINER
set -euo pipefail
export GPT_EMULATED_DEVICES=4  # one emulated GPU per rank, for NCCL
build="$1"; work="$2"; trainer="$3"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
"$here/../make_tiny_run.sh" "$build" "$work"  # global batch 8, micro-batch 2
mpirun="$here/../../scripts/mpirun.sh"
common=(--config "$work/tiny.toml" --n-head 2 --device cuda --comm nccl)
# zero3 on 2 ranks, 4 micro-batches per rank per step, every phase that
# talks to the GPU.
phases=(--strategy zero3 --global-batch 16 --steps 3 --val-data "$work/data/d_train_000000.bin" --eval-every 1
        --val-batches 1 --sample-every 2 --sample-tokens 4 --ckpt-dir "$work/ckpt" --ckpt-every 1)

failures=0
printf '%-24s %-10s %3s %4s %6s  %s\n' run fault np rc secs error
# run_fault NAME FAULT NP TIMEOUT_S EXPECTED_ERROR_REGEX ARGS...
run_fault() {
  local name="$1" fault="$2" np="$3" limit="$4" expect="$5"; shift 5
  local log="$work/$name.log" start end rc
  rm -rf "$work/ckpt"
  start=$(date +%s.%N)
  set +e
  GPT_EMULATED_NCCL_FAULT="$fault" timeout 120 "$mpirun" -np "$np" "$trainer" "${common[@]}" --comm-timeout "$limit" \
    "$@" > "$log" 2>&1
  rc=$?
  set -e
  end=$(date +%s.%N)
  local secs error why=""
  secs=$(python3 -c "print(f'{$end - $start:.1f}')")
  error=$(grep -m1 '^error: ' "$log" || true)
  if [ "$rc" -eq 0 ]; then why="exited 0";
  elif [ "$rc" -eq 124 ]; then why="still running after 120 s (a hang)";
  elif grep -q 'host CUDA runtime: .*would hang here' "$log"; then why="$(grep -m1 'host CUDA runtime' "$log")";
  elif ! grep -Eq "^error: .*$expect" "$log"; then why="no error line matching '$expect'";
  elif python3 -c "import sys; sys.exit(0 if $secs >= $limit else 1)"; then :;
  else why="ended after $secs s, before --comm-timeout $limit";
  fi
  printf '%-24s %-10s %3s %4s %6s  %s\n' "$name" "$fault" "$np" "$rc" "$secs" "${error:0:110}"
  if [ -n "$why" ]; then
    echo "FAILED: $name: $why (log: $log)"
    tail -n 30 "$log"
    failures=$((failures + 1))
  fi
}

# collectives NAME ARGS...: a healthy run; prints how many collectives one
# rank issued (every rank issues the same ones).
collectives() {
  local name="$1"; shift
  rm -rf "$work/ckpt" "$work/api_$name"
  mkdir -p "$work/api_$name"
  GPT_EMULATED_API_LOG="$work/api_$name" "$mpirun" -np 2 "$trainer" "${common[@]}" "$@" > "$work/healthy_$name.log" 2>&1 ||
    { echo "FAILED: the healthy run $name" >&2; tail -n 30 "$work/healthy_$name.log" >&2; return 1; }
  python3 - "$work/api_$name" <<'PY'
import glob, sys
counts = []
for path in glob.glob(sys.argv[1] + "/api.*.txt"):
    with open(path) as f:
        counts.append(sum(int(v) for k, v in (line.split() for line in f) if k.startswith("nccl.")))
assert counts and len(set(counts)) == 1, counts
print(counts[0])
PY
}

stuck='waited [0-9]+ s for the GPU \([a-zA-Z ]+\) without it finishing'
nccl_error='an NCCL collective \(asynchronous error\) failed on rank [0-9]+ .*remote process exited'
# ddp on 2 ranks: 4 bucket all-reduces a step, so 6 is in step 2.
run_fault ddp_np2_step2 hang:6 2 3 "$stuck" --strategy ddp --steps 4
# NCCL's asynchronous error alone ends the job: no timeout is set. The
# last collective of zero3's step 2 (the gradient norm's all-reduce) fails
# while the host waits for the norm, so only the watchdog's poll of the
# communicators sees it (a collective issued after it would see it too,
# when it checks its communicator).
two_steps=$(collectives zero3_2steps --strategy zero3 --steps 2)
run_fault zero3_np2_error "error:$two_steps" 2 0 "$nccl_error" --strategy zero3 --steps 4
# One rank's host stops (stall:N@1) while it is rank 0's GPU that waits:
# rank 0's watchdog ends the job, rank 1 included (MPI_Abort), although
# rank 1 never returns to check anything.
run_fault zero3_np2_stall "stall:$((two_steps - 3))@1" 2 3 "$stuck" --strategy zero3 --steps 4
if ! grep -q 'host NCCL: rank 1 stalls' "$work/zero3_np2_stall.log"; then
  echo "FAILED: zero3_np2_stall: rank 1 never stalled (log: $work/zero3_np2_stall.log)"
  failures=$((failures + 1))
fi
# Two communicators (shard and replica groups) on 4 ranks.
run_fault hybrid_np4_step2 hang:15 4 3 "$stuck" --strategy hybrid --mesh 2x2 --steps 3

# The sweep, over a healthy run's collectives.
total=$(collectives phases "${phases[@]}")
echo "healthy zero3 run: $total collectives per rank"
for k in $(seq 0 9); do
  n=$((1 + k * (total - 1) / 9))
  run_fault "zero3_np2_sweep_$n" "hang:$n" 2 2 "$stuck" "${phases[@]}"
done

if [ "$failures" -gt 0 ]; then
  echo "$failures run(s) failed"
  exit 1
fi
echo "every run ended with its error, none would have hung"
