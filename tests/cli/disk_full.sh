#!/usr/bin/env bash
# A checkpoint write that runs out of disk (a 1 MiB tmpfs; the tiny model's
# checkpoint is 1.4 MiB) ends every rank within seconds, with one line
# naming the step, the file, the dataset being written, HDF5's message and
# the room left on the file system, and publishes nothing. Before, the rank
# whose write failed (rank 0, which writes HDF5's metadata) hung closing
# the file collectively while the others waited in the next tensor's write,
# until --comm-timeout (600 s) ended them with "no progress".
#   1. synchronous (ddp on 2 ranks) and with --ckpt-async (zero3 on 2
#      ranks, 40 steps): the background write's failure ends the run after
#      the next step or so, not at the next checkpoint or the end;
#   2. with room again, --resume auto passes over the .partial- directory:
#      the run starts fresh, publishes its checkpoints and removes it;
#   3. --metrics on the full disk: one warning naming the file and the
#      cause, and the run trains to its end (exit 0).
# Runs in a mount namespace of its own; skipped (77) where that is not
# allowed.
#   disk_full.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
need_mount_namespaces
disk="$work/disk"
mkdir -p "$disk"
export root build work disk trainer
# shellcheck disable=SC2016  # expanded by the namespace's shell
unshare -m --propagation private bash -c '
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
mount -t tmpfs -o size=1m none "$disk" || fail "mount a 1 MiB tmpfs"
full_run() {  # NAME STEPS FLAGS...: must fail with the one line, soon
  local name=$1 steps=$2; shift 2
  local t0=$SECONDS rc=0
  rm -rf "$disk/ck"  # the last run'"'"'s .partial- fills the disk: the start-up'"'"'s probe would refuse it, in one line too
  timeout 120 "$root/scripts/mpirun.sh" -np 2 "$trainer" --config "$work/tiny.toml" --steps "$steps" --ckpt-every 2 \
    --ckpt-dir "$disk/ck" --log-every 1 "$@" >"$work/$name.log" 2>&1 || rc=$?
  ((rc != 0)) || { cat "$work/$name.log"; fail "$name: a checkpoint write on a full disk succeeded"; }
  ((rc != 124)) || { cat "$work/$name.log"; fail "$name: hung (killed after 120 s)"; }
  want="^error: checkpoint step 2: writing $disk/ck/.partial-step_00000002/state.h5 failed at /[a-z_]*/[a-z0-9_.]*"
  want+=": H5Dwrite: can.t write data \(file write failed\); its file system has [0-9.]+ [KMG]?i?B free of 1.0 MiB;"
  want+=" nothing was published( \(ranks? [0-9, -]+ on [^)]*\))?$"
  n=$(grep -Ec "$want" "$work/$name.log")
  ((n == 1)) || { cat "$work/$name.log"; fail "$name: expected the one error line once, found it $n times"; }
  grep -q "no progress" "$work/$name.log" && { cat "$work/$name.log"; fail "$name: ended by the stall guard"; }
  [[ -z "$(find "$disk/ck" -maxdepth 1 -name "step_*")" ]] || fail "$name: a checkpoint was published"
  last=$(grep -Eo "step +[0-9]+/$steps" "$work/$name.log" | tail -1 | grep -Eo "[0-9]+" | head -1)
  echo "ok: $name: exit $rc after $((SECONDS - t0)) s, last step ${last:-none}: $(grep -E "$want" "$work/$name.log")"
}
full_run sync 4 --strategy ddp
# Steps here take 3-40 ms and the write fails within a few of them: well before step 40.
full_run async 40 --strategy zero3 --ckpt-async
((last < 20)) || fail "async: the failed background write was raised only after step $last"
mount -o remount,size=16m "$disk" || fail "remount with room"
"$root/scripts/mpirun.sh" -np 2 "$trainer" --config "$work/tiny.toml" --steps 4 --ckpt-every 2 --ckpt-dir "$disk/ck" \
  --resume auto >"$work/room.log" 2>&1 || { cat "$work/room.log"; fail "with room again: the run failed"; }
grep -q "resume auto: no checkpoint in $disk/ck yet, starting fresh" "$work/room.log" ||
  { cat "$work/room.log"; fail "with room again: did not start fresh"; }
[[ -f "$disk/ck/step_00000004/COMPLETE" && -z "$(find "$disk/ck" -maxdepth 1 -name ".partial-*")" ]] ||
  { ls -la "$disk/ck"; fail "with room again: step 4 not published, or the .partial- left"; }
echo "ok: with room again, a fresh start published step 4 and removed the .partial- directory"
mount -o remount,size=1m "$disk" 2>/dev/null || { umount "$disk" && mount -t tmpfs -o size=1m none "$disk"; } ||
  fail "a 1 MiB tmpfs again"
rm -rf "$disk"/* && head -c 2M /dev/zero > "$disk/fill" 2>/dev/null  # fails when the disk is full, as meant
"$root/scripts/mpirun.sh" -np 2 "$trainer" --config "$work/tiny.toml" --steps 4 --metrics "$disk/m.jsonl" \
  >"$work/metrics.log" 2>&1 || { cat "$work/metrics.log"; fail "metrics on a full disk: the run failed"; }
want="metrics: writing $disk/m.jsonl failed: No space left on device; the run goes on, without the records that"
n=$(grep -c "$want" "$work/metrics.log")
((n == 1)) || { cat "$work/metrics.log"; fail "metrics on a full disk: expected the warning once, found it $n times"; }
grep -Eq "step +4/4" "$work/metrics.log" || { cat "$work/metrics.log"; fail "metrics on a full disk: no step 4"; }
echo "ok: metrics on a full disk: one warning, and the run trained its 4 steps"
'
