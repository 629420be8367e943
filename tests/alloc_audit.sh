#!/usr/bin/env bash
# The allocation audit (ctest alloc.hot_loop): every heap allocation one
# steady-state training step makes on the host, with its stack, under
# heaptrack (rank 0's). Each set-up runs for 2 and for 4 steps; heaptrack_print's diff
# of the two runs is what the 2 extra steps allocated, whatever the set-up
# and the teardown did. tests/alloc_audit.py attributes each stack to our
# code, to Open MPI's internals or to the CUDA emulator, and holds our code
# to no allocation per step: issuing a collective reuses its task or Work,
# host waits name themselves without formatting, the metrics record is
# formatted into a buffer kept from step to step. --log-every is set past
# the run, so no log line (spdlog formats each) falls in the extra steps.
# CPU set-ups run the real trainer; with EMULATED_TRAINER, the same audit
# covers --device cuda on the emulated backend (NCCL's path and the MPI
# communicator's staging). Prints one row per set-up; writes
# WORK_DIR/alloc_audit.json. ALLOC_AUDIT_ONLY=REGEX runs only the set-ups
# whose names match.
#   alloc_audit.sh BUILD_DIR WORK_DIR [EMULATED_TRAINER]
set -euo pipefail
build="$1"; work="$2"; emulated="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
mpirun="$here/../scripts/mpirun.sh"
for tool in heaptrack heaptrack_print; do
  command -v "$tool" >/dev/null || { echo "alloc_audit: $tool not found: run scripts/setup.sh (Debian package heaptrack)"; exit 1; }
done
rm -rf "$work"
"$here/make_tiny_run.sh" "$build" "$work" >/dev/null  # global batch 8, micro-batch 2

run() {  # NAME NP TRAINER ARGS...
  local name="$1" np="$2" trainer="$3"; shift 3
  [[ -z "${ALLOC_AUDIT_ONLY:-}" || "$name" =~ $ALLOC_AUDIT_ONLY ]] || return 0
  rm -rf "${work:?}/$name"
  for steps in 2 4; do
    local dir="$work/$name/steps$steps"
    mkdir -p "$dir"
    # Rank 0 under heaptrack: every rank runs the same step, and rank 0 also
    # writes the metrics. (Profiling every rank would cost as much again per
    # rank: heaptrack resolves the symbols of every library loaded, cuBLASLt
    # and NCCL included, about 10 s a process.)
    "$mpirun" -np "$np" bash -c 'if [[ $OMPI_COMM_WORLD_RANK == 0 ]]; then exec heaptrack -o "$0/rank.0" "$@"; else exec "$@"; fi' "$dir" \
      "$trainer" --config "$work/tiny.toml" --n-head 2 --steps "$steps" --log-every 1000 "$@" \
      > "$dir/log" 2>&1 || { echo "FAILED: $name, $steps steps"; cat "$dir/log"; exit 1; }
  done
  heaptrack_print -f "$work/$name/steps4/rank.0.zst" -d "$work/$name/steps2/rank.0.zst" -a 0 -p 0 -l 0 -T 0 \
    --flamegraph-cost-type allocations -F "$work/$name/diff.0.folded" > /dev/null
  echo "$name $np $*" >> "$work/setups.txt"
}

cpu="$build/apps/gpt_train"
audit_all() {
rm -f "$work/setups.txt"
run cpu_ddp_np1 1 "$cpu"
run cpu_ddp_np2 2 "$cpu" --strategy ddp
run cpu_zero3_np2 2 "$cpu" --strategy zero3
run cpu_hybrid_np4 4 "$cpu" --strategy hybrid --mesh 2x2
if [[ -n "$emulated" ]]; then
  export GPT_EMULATED_DEVICES=4  # one emulated GPU per rank, for NCCL
  run cuda_nccl_zero3_np2 2 "$emulated" --device cuda --comm nccl --strategy zero3
  run cuda_mpi_zero3_np2 2 "$emulated" --device cuda --comm mpi --strategy zero3
fi
python3 "$here/alloc_audit.py" "$work" "$work/setups.txt" 2
}
audit_all && exit 0
# Over budget: those set-ups run once more, and only a second excess fails.
# An allocation every step recurs in every run; what one run can show and
# the next not is a high-water mark (a pool or queue that grows once, when
# the threads happened to lag most) falling in that run's extra steps. Seen
# once in 25 stops: 1 allocation in MpiCommunicator::enqueue, MPI-staged
# zero3, in a full ctest -j2; not again in 4 runs under load.
over=$(python3 -c 'import json, sys; print("|".join(r["setup"] for r in json.load(open(sys.argv[1])) if r["over_budget"]))' \
  "$work/alloc_audit.json")
[[ -n "$over" ]] || exit 1
echo "alloc_audit: over budget in $over; running those set-ups again"
mv "$work/alloc_audit.json" "$work/alloc_audit.first.json"
ALLOC_AUDIT_ONLY="^($over)\$" audit_all
