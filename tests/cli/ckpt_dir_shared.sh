#!/usr/bin/env bash
# A --ckpt-dir that not every rank sees (node-local storage in a multi-node
# job) is refused at the start, on every rank, with one line naming the
# ranks that cannot see it: every rank writes into each checkpoint's one
# HDF5 file, so each node would otherwise write a file of its own. Rank 1
# runs in a mount namespace of its own with a tmpfs over the directory, so
# it sees an empty directory where rank 0 writes. Skipped (77) where mount
# namespaces are not allowed.
#   ckpt_dir_shared.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
need_mount_namespaces
dir="$work/ckpt"
mkdir -p "$dir"
# shellcheck disable=SC2016  # expanded by the ranks' shells
"$root/scripts/mpirun.sh" -np 2 bash -c '
  if [[ $OMPI_COMM_WORLD_RANK == 1 ]]; then
    exec unshare -m --propagation private bash -c "mount -t tmpfs none \"\$0\" && exec \"\$@\"" "$0" "${@:1}"
  fi
  exec "${@:1}"' "$dir" "$build/apps/gpt_train" --config "$work/tiny.toml" --steps 2 --ckpt-dir "$dir" \
  >"$work/unshared.log" 2>&1
rc=$?
cat "$work/unshared.log"
(( rc != 0 )) || fail "a run whose rank 1 does not see --ckpt-dir succeeded"
want="error: invalid ckpt-dir = '$dir': 1 rank of 2 (rank 1 on .*) cannot see the files rank 0 writes in it; all ranks"
n=$(grep -c "$want" "$work/unshared.log")
(( n == 1 )) || fail "expected the line '$want' once, found it $n times"
grep -qE "step +[0-9]+/2 \| loss" "$work/unshared.log" && fail "the run trained before refusing the directory"
left=$(find "$dir" -mindepth 1 | head -1)
[[ -z "$left" ]] || fail "the probe was left behind: $left"
echo "ok: an unshared --ckpt-dir is refused at the start (exit $rc), one line naming rank 1"
