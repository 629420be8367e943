#!/usr/bin/env bash
# A rank that stops for good where the others block inside a library call
# that no wait of ours can poll must not hang the job: the StallGuard
# (core/stall_guard.hpp) ends every rank after --comm-timeout without
# progress, with one error line naming the stretch.
#   stall.sh BUILD_DIR WORK_DIR checkpoint
#     GPT_TEST_CKPT_STALL_RANK=1: rank 1 stops as it writes the step-2
#     checkpoint (a file system write that never returns); rank 0 blocks in
#     HDF5's collective write. Synchronous and background (--ckpt-async)
#     writer; nothing is published.
#   stall.sh BUILD_DIR WORK_DIR end
#     GPT_TEST_END_STALL_RANK=1: rank 1 stops after the run, outside any
#     guard of its own; rank 0 blocks in MPI_Finalize, which waits for every
#     rank, and only rank 0's guard can end the job.
# Control, each hook: with --comm-timeout 0 (no guard) the same job is still
# running when `timeout` ends it, so it is the guard that ends it.
set -uo pipefail
hook="$3"
source "$(dirname "$0")/common.sh" "$@"
args=(--config "$work/tiny.toml" --micro-batch 4 --steps 4 --strategy zero3 --log-every 1000)

case "$hook" in
  checkpoint) hook_env=GPT_TEST_CKPT_STALL_RANK=1; modes=(sync async); args+=(--ckpt-every 2) ;;
  end) hook_env=GPT_TEST_END_STALL_RANK=1; modes=(end) ;;
  *) fail "unknown hook '$hook' (checkpoint or end)" ;;
esac

# run NAME LIMIT_S ARGS...: the job under `timeout LIMIT_S`; sets rc and secs.
run() {
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  env "$hook_env" timeout -k 5 "$limit" "$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" \
    "${args[@]}" --ckpt-dir "$work/ckpt-$name" "$@" >"$work/$name.log" 2>&1
  rc=$?; secs=$((SECONDS - t0))
}

timeout_s=3
for mode in "${modes[@]}"; do
  extra=()
  case "$mode" in
    sync) what="the checkpoint write of step 2" ;;
    async) what="the checkpoint write of step 2 (background)"; extra=(--ckpt-async) ;;
    end) what="the end of the run: the teardown, then MPI_Finalize's wait for every rank" ;;
  esac
  run "$mode" 120 --comm-timeout "$timeout_s" "${extra[@]}"
  [[ $rc != 124 && $rc != 137 ]] || { cat "$work/$mode.log"; fail "$mode: the job hung (killed after 120 s)"; }
  [[ $rc != 0 ]] || { cat "$work/$mode.log"; fail "$mode: the job exited 0"; }
  n=$(grep -cF "error: no progress for $timeout_s s in $what" "$work/$mode.log")
  ((n >= 1)) ||
    { cat "$work/$mode.log"; fail "$mode: no error line naming $what"; }
  ((secs >= timeout_s)) || fail "$mode: ended after $secs s, before the $timeout_s s limit"
  if [[ $mode == end ]]; then
    ((n == 1)) || { cat "$work/$mode.log"; fail "$mode: $n ranks reported the stall; only rank 0 is in the guard"; }
    # The run itself completed: its last step's checkpoint is published.
    [[ -e "$work/ckpt-$mode/step_00000004" ]] || fail "$mode: the run did not finish before the stall"
  else
    [[ ! -e "$work/ckpt-$mode/step_00000002" ]] || fail "$mode: a checkpoint was published"
  fi
  echo "ok: $mode: exit $rc after $secs s: $(grep -m1 '^error: no progress' "$work/$mode.log")"
done

run control 20 --comm-timeout 0
[[ $rc == 124 || $rc == 137 ]] || { cat "$work/control.log"; fail "control: without the guard the job ended (exit $rc)"; }
echo "ok: control: without the guard (--comm-timeout 0) the job was still stuck after $secs s"
