#!/usr/bin/env bash
# scripts/sweep's own flags: a mistyped one is named with the one it likely
# meant, and one of gpt_train's is told to go after "--"; each exits 2 (argparse's
# usage error) before any run starts.
set -uo pipefail
sweep="$(dirname "$0")/../../scripts/sweep"
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # WANT ARGS...: the last stderr line of `sweep ARGS` is WANT, and it exits 2
  local want="$1" out rc=0; shift
  out=$("$sweep" "$@" 2>&1 >/dev/null) || rc=$?
  (( rc == 2 )) || fail "sweep $*: exit $rc, expected 2"
  [[ "$(tail -1 <<<"$out")" == "$want" ]] || { echo "$out"; fail "sweep $*: expected '$want'"; }
  echo "ok: sweep $*: $want"
}
expect "sweep run: error: unknown flag --stratgies (did you mean --strategies?)" run --stratgies ddp,zero1
expect "sweep list: error: unknown flag --stpes (did you mean --steps?)" list --stpes=3
expect "sweep run: error: unknown flag --lr (gpt_train's flags go after --: sweep run ... -- --lr ...)" run --lr 1e-3
expect "sweep report: error: unexpected argument 'b'" report a b
# A well-formed command line still lists the grid.
out=$("$sweep" list --strategies ddp,zero3 --ranks 2) || fail "sweep list failed"
[[ "$(wc -l <<<"$out")" == 2 ]] || { echo "$out"; fail "sweep list: expected 2 cells"; }
echo "ok: sweep list of 2 strategies lists 2 cells"
