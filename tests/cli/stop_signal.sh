#!/usr/bin/env bash
# A stop signal (core/stop_signal.hpp) ends the run after the current step,
# on every rank, with a checkpoint and exit 75; --resume auto then continues
# it, and the two pieces together are the uninterrupted run, loss for loss.
#   1. reference: 2 ranks, zero3, STEPS steps, uninterrupted;
#   2. the same job with --ckpt-dir; once 5 steps are logged, SIGTERM goes to
#      every rank (what SLURM does at a time limit or on scancel): exit 75,
#      the step it stopped after is checkpointed, the summary names the signal;
#   3. --resume auto to the end: exit 0; every step's loss equals the
#      reference's (the metrics file holds both pieces);
#   4. a second signal ends a stop that cannot finish: rank 1 stalls for good
#      in the stop's checkpoint (GPT_TEST_CKPT_STALL_RANK=1, no guard:
#      --comm-timeout 0); SIGUSR1 to mpirun (which forwards it) starts the
#      stop, the job is still stuck 5 s later (the control), and a second
#      SIGUSR1 ends it at once, nothing published;
#   5. a job script launching with mpirun passes its batch shell's SIGUSR1 on
#      (without that the shell dies of it, exit 138, and no rank hears it).
#   stop_signal.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
# Enough steps that a signal sent after step 5 arrives before the end: a
# tiny step takes about 1 ms, and with 300 a fast, idle machine finished
# before the SIGTERM reached the ranks (seen once in CI).
steps=3000
args=(--config "$work/tiny.toml" --micro-batch 4 --steps $steps --strategy zero3 --log-every 1000)
launch() { "$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" "${args[@]}" "$@"; }
step_lines() { local n; n=$(grep -c '"grad_norm"' "$1" 2>/dev/null); echo "${n:-0}"; }  # step records
# wait_for FILE N PID: until FILE has N step records (or PID has ended); at
# most 2 minutes: a loaded machine starts two oversubscribed ranks slowly.
# (The test failed once with the whole suite at -j2 and passed alone; which
# step failed was not kept, so the waits that could run out were widened.)
wait_for() {
  for _ in $(seq 2400); do
    (( $(step_lines "$1") >= $2 )) && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# 1. reference
launch --metrics "$work/ref.jsonl" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; fail "reference run failed"; }

# 2. SIGTERM to the ranks
launch --metrics "$work/run.jsonl" --ckpt-dir "$work/ckpt" >"$work/stop.log" 2>&1 &
job=$!
wait_for "$work/run.jsonl" 5 $job || { cat "$work/stop.log"; fail "the run ended before 5 steps"; }
# The ranks only: mpirun itself, sent SIGTERM, would kill the job at once.
for pid in $(pgrep -f "$work/run.jsonl"); do
  [[ $(ps -o comm= -p "$pid") == gpt_train ]] && kill -TERM "$pid"
done
wait $job; rc=$?
[[ $rc == 75 ]] || { cat "$work/stop.log"; fail "stopped run: exit $rc, expected 75"; }
n=$(sed -n 's/.*stopping after step \([0-9]*\) of .*/\1/p' "$work/stop.log")
[[ -n $n ]] || { cat "$work/stop.log"; fail "no 'stopping after step' line"; }
((n >= 5 && n < steps)) || fail "stopped after step $n"
grep -q "stopping after step $n of $steps: SIGTERM on [12] of 2 ranks" "$work/stop.log" || fail "the stop line does not name SIGTERM"
[[ -f "$work/ckpt/step_$(printf %08d "$n")/COMPLETE" ]] || { ls "$work/ckpt"; fail "no checkpoint of step $n"; }
(( $(step_lines "$work/run.jsonl") == n )) || fail "the metrics hold $(step_lines "$work/run.jsonl") steps, not $n"
grep '"type":"summary"' "$work/run.jsonl" | grep -q "\"steps_done\":$n,\"stop_signal\":\"SIGTERM\"" ||
  { grep summary "$work/run.jsonl"; fail "the summary does not say steps_done $n, stop_signal SIGTERM"; }
echo "ok: SIGTERM: exit 75 after step $n of $steps, its checkpoint published"

# 3. resume to the end; the losses are the reference's
launch --metrics "$work/run.jsonl" --ckpt-dir "$work/ckpt" --resume auto >"$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; fail "the resumed run failed"; }
grep -q "resumed from .*step_$(printf %08d "$n") (step $n," "$work/resume.log" ||
  { cat "$work/resume.log"; fail "the resume did not start from the checkpoint of step $n"; }
losses() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "type" not in r: print(r["step"], repr(r["loss"]))' "$1"; }  # step records have no type
diff <(losses "$work/ref.jsonl") <(losses "$work/run.jsonl") >"$work/loss.diff" ||
  { head "$work/loss.diff"; fail "stopped + resumed losses differ from the uninterrupted run's"; }
grep '"type":"summary"' "$work/run.jsonl" | tail -1 | grep -q "\"steps_done\":$steps,\"stop_signal\":null" ||
  fail "the resumed run's summary is not steps_done $steps, stop_signal null"
echo "ok: resumed after step $n: all $steps losses equal the uninterrupted run's"

# 4. a second signal ends a stop that cannot finish
GPT_TEST_CKPT_STALL_RANK=1 launch --ckpt-dir "$work/ckpt2" --metrics "$work/stall.jsonl" --comm-timeout 0 \
  >"$work/second.log" 2>&1 &
job=$!
wait_for "$work/stall.jsonl" 5 $job || { cat "$work/second.log"; fail "the run ended before 5 steps"; }
mpirun_pid=""
for pid in $(pgrep -f "$work/stall.jsonl"); do
  [[ $(ps -o comm= -p "$pid") == mpirun ]] && mpirun_pid=$pid
done
[[ -n $mpirun_pid ]] || fail "no mpirun process found" 
kill -USR1 "$mpirun_pid"
for _ in $(seq 300); do grep -q "stopping after step" "$work/second.log" && break; sleep 0.1; done
grep -q "stopping after step [0-9]* of $steps: SIGUSR1" "$work/second.log" ||
  { cat "$work/second.log"; kill -9 $job; fail "SIGUSR1 through mpirun did not start a stop"; }
sleep 5
kill -0 $job 2>/dev/null || { cat "$work/second.log"; fail "control: the stop with a stalled checkpoint ended by itself"; }
t0=$SECONDS
kill -USR1 "$mpirun_pid"
for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  pkill -9 -f "$work/stall.jsonl"; fail "the second SIGUSR1 did not end the job within 30 s"
fi
wait $job; rc=$?
((rc != 0 && rc != 75)) || fail "second signal: exit $rc"
ls "$work/ckpt2" 2>/dev/null | grep -q '^step_' && fail "second signal: a checkpoint was published"
echo "ok: second SIGUSR1: the job (stuck in its stop's checkpoint for 5 s) ended after $((SECONDS - t0)) s, exit $rc"

# 5. a job script with GPT_LAUNCHER=mpirun: SIGUSR1 to its batch shell (what
#    sbatch --signal=B:USR1@180 sends) reaches the ranks through lib.sh's
#    forwarding to mpirun. Without it the shell would die of the signal (exit 138) and
#    the ranks never hear of it.
GPT_ROOT="$root" GPT_BUILD="$build" GPT_LAUNCHER=mpirun SLURM_NTASKS=2 bash -c '
  set -euo pipefail
  source "$GPT_ROOT/jobscripts/lib.sh"
  gpt_init
  gpt_launch "$@"' batch "$build/apps/gpt_train" "${args[@]}" --metrics "$work/batch.jsonl" --ckpt-dir "$work/ckpt3" \
  >"$work/batch.log" 2>&1 &
job=$!
wait_for "$work/batch.jsonl" 5 $job || { cat "$work/batch.log"; fail "the job script's run ended before 5 steps"; }
kill -USR1 $job
wait $job; rc=$?
[[ $rc == 75 ]] || { cat "$work/batch.log"; fail "job script with GPT_LAUNCHER=mpirun: exit $rc after SIGUSR1 to its shell, expected 75"; }
n=$(sed -n 's/.*stopping after step \([0-9]*\) of .*/\1/p' "$work/batch.log")
# 1 or 2 of 2, as in 2.: mpirun forwards the signal to each rank, and with
# steps of about 1 ms the step's all-reduce of the stop flags may fall
# between the two deliveries (seen once in a loaded ctest -j2 run). Either
# way every rank stopped after the same step (the checkpoint below).
grep -q "stopping after step $n of $steps: SIGUSR1 on [12] of 2 ranks" "$work/batch.log" ||
  { cat "$work/batch.log"; fail "the job script's stop line does not name SIGUSR1"; }
[[ -f "$work/ckpt3/step_$(printf %08d "$n")/COMPLETE" ]] || fail "the job script's run left no checkpoint of step $n"
echo "ok: GPT_LAUNCHER=mpirun: SIGUSR1 to the batch shell stopped the job after step $n, checkpointed, exit 75"
