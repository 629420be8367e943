#!/usr/bin/env bash
# A rank that stops for good while a checkpoint is written (the test hook
# GPT_TEST_CKPT_STALL_RANK=1: a file system write that never returns) must
# not hang the job: the other rank blocks inside HDF5's collective write,
# where no wait of ours can poll, and the StallGuard (core/stall_guard.hpp)
# ends every rank after --comm-timeout without progress, with one error line
# naming the checkpoint. Nothing is published. Both the synchronous and the
# background (--ckpt-async) writer. Control: with --comm-timeout 0 (no
# guard) the same job is still running when `timeout` ends it, so it is the
# guard that ends it, not something else.
#   ckpt_stall.sh BUILD_DIR WORK_DIR
set -uo pipefail
build="$1"; work="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work"
"$root/tests/make_tiny_run.sh" "$build" "$work" || exit 1  # 2 layers, width 64, T=32, global batch 8
args=(--config "$work/tiny.toml" --micro-batch 4 --steps 4 --strategy zero3 --ckpt-every 2 --log-every 1000)
fail() { echo "FAIL: $*"; exit 1; }

# run NAME LIMIT_S ARGS...: the job under `timeout LIMIT_S`; sets rc and secs.
run() {
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  GPT_TEST_CKPT_STALL_RANK=1 timeout -k 5 "$limit" "$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" \
    "${args[@]}" --ckpt-dir "$work/ckpt-$name" "$@" >"$work/$name.log" 2>&1
  rc=$?; secs=$((SECONDS - t0))
}

timeout_s=3
for mode in sync async; do
  extra=(); what="the checkpoint write of step 2"
  [[ $mode == async ]] && { extra=(--ckpt-async); what="$what (background)"; }
  run "$mode" 120 --comm-timeout "$timeout_s" "${extra[@]}"
  [[ $rc != 124 && $rc != 137 ]] || { cat "$work/$mode.log"; fail "$mode: the job hung (killed after 120 s)"; }
  [[ $rc != 0 ]] || { cat "$work/$mode.log"; fail "$mode: the job exited 0"; }
  grep -q "^error: no progress for $timeout_s s in $what" "$work/$mode.log" ||
    { cat "$work/$mode.log"; fail "$mode: no error line naming $what"; }
  ((secs >= timeout_s)) || fail "$mode: ended after $secs s, before the $timeout_s s limit"
  [[ ! -e "$work/ckpt-$mode/step_00000002" ]] || fail "$mode: a checkpoint was published"
  echo "ok: $mode: exit $rc after $secs s: $(grep -m1 '^error: no progress' "$work/$mode.log")"
done

run control 20 --comm-timeout 0
[[ $rc == 124 || $rc == 137 ]] || { cat "$work/control.log"; fail "control: without the guard the job ended (exit $rc)"; }
echo "ok: control: without the guard (--comm-timeout 0) the job was still stuck after $secs s"
