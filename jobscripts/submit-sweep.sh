#!/usr/bin/env bash
# Submits a strategy sweep: an array job with one task per run of the grid
# (jobscripts/sweep.sbatch) and a report job that runs after all of them.
#   GPT_OUT=$PWD/runs/sweep1 GPT_SWEEP_STRATEGIES=ddp,zero2,zero3,hybrid GPT_STEPS=50 \
#     jobscripts/submit-sweep.sh [sbatch options for the array, e.g. --ntasks=8 --partition=gpu]
#   GPT_SWEEP_PARALLEL=N   run at most N array tasks at once
# Prints the two job ids.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GPT_ROOT="${GPT_ROOT:-$(dirname "$here")}"
source "$here/lib.sh"
gpt_check_env
[[ -n "${GPT_OUT:-}" ]] || gpt_die "set GPT_OUT to the sweep directory (on a filesystem every node sees)"
export GPT_OUT="$(realpath -m "$GPT_OUT")"
mkdir -p "$GPT_OUT"
root="$GPT_ROOT"
gpt_sweep_grid
n=$("$GPT_ROOT/scripts/sweep" list "${grid[@]}" | wc -l)
(( n > 0 )) || gpt_die "the sweep grid is empty"
array="0-$((n - 1))${GPT_SWEEP_PARALLEL:+%$GPT_SWEEP_PARALLEL}"
cd "$GPT_ROOT"
jid=$(sbatch --parsable --array="$array" --output="$GPT_OUT/%x-%A_%a.out" "$@" "$here/sweep.sbatch")
rid=$(sbatch --parsable --dependency="afterany:${jid%%;*}" --output="$GPT_OUT/%x-%j.out" "$here/sweep-report.sbatch")
echo "sweep array job ${jid%%;*} ($n runs), report job ${rid%%;*}: $GPT_OUT/report.md"
