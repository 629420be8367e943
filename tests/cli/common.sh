# The shared start of the script-level training tests, sourced as
#   source "$(dirname "$0")/common.sh" "$@"
# by a test whose first two arguments are BUILD_DIR and WORK_DIR. It sets
# root (the repository), build and work; makes WORK_DIR afresh with the small
# training set-up of tests/make_tiny_run.sh (data/ and tiny.toml: 2 layers,
# width 64, T=32, global batch 8); and defines
#   fail MESSAGE...           prints "FAIL: MESSAGE" and exits 1;
#   tiny_run NAME NP FLAGS... $trainer (default build/apps/gpt_train) on NP
#                             ranks with tiny.toml and FLAGS, its output in
#                             WORK_DIR/NAME.log; returns its exit status;
#   tiny_run_ok NAME NP FLAGS...  the same, and a failed run prints its log
#                             and fails the test;
#   need_mount_namespaces     skips the test (exit 77) where a mount
#                             namespace with a tmpfs cannot be made.
# Sourced, it runs under the test's own shell options (set -u at least).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$1"; work="$2"
trainer="${trainer:-$build/apps/gpt_train}"
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"
"$root/tests/make_tiny_run.sh" "$build" "$work" >/dev/null || fail "tests/make_tiny_run.sh $build $work"
tiny_run() {
  local name=$1 np=$2; shift 2
  "$root/scripts/mpirun.sh" -np "$np" "$trainer" --config "$work/tiny.toml" "$@" >"$work/$name.log" 2>&1
}
tiny_run_ok() {
  local rc=0
  tiny_run "$@" || rc=$?
  (( rc == 0 )) || { cat "$work/$1.log"; fail "$1: the run failed (exit $rc)"; }
}
need_mount_namespaces() {
  unshare -m --propagation private bash -c "mount -t tmpfs none '$work' && umount '$work'" 2>/dev/null \
    || { echo "skipped: mount namespaces (unshare -m) are not allowed here"; exit 77; }
}
