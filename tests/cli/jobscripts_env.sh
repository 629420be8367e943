#!/usr/bin/env bash
# The job scripts' check of GPT_* variables (jobscripts/lib.sh gpt_check_env):
# one within 2 edits (3 for a long name) of a variable they read is an error naming both (exit 2),
# before anything runs; the user's own GPT_* variables and every known one
# pass; and the known list holds every GPT_* variable the job scripts read.
set -uo pipefail
lib="$(cd "$(dirname "$0")/../.." && pwd)/jobscripts/lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
check() { env -i PATH="$PATH" "$@" bash -c "set -euo pipefail; source '$lib'; gpt_check_env; echo passed" 2>&1; }

out=$(check GPT_STPES=100) && fail "GPT_STPES passed: $out"
[[ "$out" == "error: GPT_STPES is set, but no job script reads it (did you mean GPT_STEPS?)" ]] || fail "GPT_STPES: '$out'"
out=$(check GPT_SWEEP_STRATEGY=ddp) && fail "GPT_SWEEP_STRATEGY passed: $out"
[[ "$out" == *"(did you mean GPT_SWEEP_STRATEGIES?)" ]] || fail "GPT_SWEEP_STRATEGY: '$out'"
echo "ok: a mistyped variable is an error naming the one it likely meant"

# Every GPT_* name the job scripts use outside comments is in the list, and all of them set at once pass.
mapfile -t used < <(grep -hv '^[[:space:]]*#' "$(dirname "$lib")"/* | grep -oE '\bGPT_[A-Z0-9_]*[A-Z0-9]\b' | sort -u)
(( ${#used[@]} >= 20 )) || fail "found only ${#used[@]} GPT_* names in the job scripts"
known=" $(bash -c "source '$lib'; echo \"\${gpt_variables[*]}\"") "
assign=()
for v in "${used[@]}"; do
  [[ "$known" == *" $v "* ]] || fail "$v is read by a job script but not in lib.sh's gpt_variables"
  assign+=("$v=1")
done
out=$(check "${assign[@]}" GPT_MY_OWN_SETTING=1 GPT_API_KEY=x) || fail "known and unrelated variables refused: $out"
[[ "$out" == passed ]] || fail "unexpected output: '$out'"
echo "ok: the ${#used[@]} variables the job scripts read, and unrelated GPT_* ones, pass"
