#!/usr/bin/env bash
# The job scripts on a real SLURM: starts a one-node cluster (cluster.sh:
# munged, slurmctld, slurmd, everything under WORK_DIR), submits each job
# script in CPU mode on a tiny model, polls until each job ends, checks its
# outputs, checks that a failing training step fails the job, and stops the
# daemons it started.
#   test_jobscripts.sh BUILD_DIR WORK_DIR
# Exit 77 (ctest: skipped, with the reason) when not root or SLURM/munge are
# not installed (scripts/setup.sh installs them).
set -euo pipefail
build="$(realpath "$1")"
work="$(realpath -m "$2")"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
[[ $(id -u) -eq 0 ]] || { echo "skip: the test cluster's daemons run as root"; exit 77; }
for exe in munged slurmctld slurmd sbatch squeue scontrol srun; do
  command -v "$exe" >/dev/null || { echo "skip: $exe not installed (scripts/setup.sh installs slurm-wlm and munge)"; exit 77; }
done

rm -rf "$work"
mkdir -p "$work"
cluster="$work/cluster"
cleanup() {
  "$here/cluster.sh" stop "$cluster" || true
}
trap cleanup EXIT
"$here/cluster.sh" start "$cluster" 8
export SLURM_CONF="$cluster/slurm.conf"

"$root/tests/make_tiny_run.sh" "$build" "$work"  # data/ and tiny.toml
export GPT_ROOT="$root" GPT_BUILD="$build" GPT_CONFIG="$work/tiny.toml"
# What scripts/mpirun.sh sets for this container, for the ranks srun starts.
# Yielding matters: the test node claims 8 CPUs, so Open MPI would spin its
# waits and starve this script (a `sleep 0.05` took 0.5 s during a job).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_mpi_yield_when_idle=1

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.out "$work"/sweep/*.out; do [[ -f "$f" ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}

# Waits for job $1 to end; prints its final state ("COMPLETED", "FAILED", ...).
wait_job() {
  local id="$1" state=""
  for _ in $(seq 600); do
    state=$(scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2)
    case "$state" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) echo "$state"; return 0 ;;
    esac
    sleep 0.5
  done
  echo "TIMEOUT_WAITING"
}
exit_code() { scontrol show job "$1" | grep -o ' ExitCode=[0-9:]*' | head -1 | cut -d= -f2; }

json_check() {  # json_check FILE PYTHON-EXPR-over-records  (records: list of metric dicts)
  python3 - "$1" "$2" <<'PY' || fail "check '$2' on $1"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
run = next(r for r in recs if r.get("type") == "run")
summary = next(r for r in recs if r.get("type") == "summary")
steps = [r for r in recs if "step" in r and "loss" in r]
ok = eval(sys.argv[2])
if not ok:
    print("check failed:", sys.argv[2], "| run:", {k: run[k] for k in ("strategy", "mesh", "world_size")},
          "| steps:", len(steps), file=sys.stderr)
    sys.exit(1)
PY
}

cd "$work"

echo "== train.sbatch: 2 ranks, zero2, checkpoints every 3 steps"
id=$(GPT_OUT="$work/train" GPT_CKPT_EVERY=3 sbatch --parsable --ntasks=2 --output="$work/train-%j.out" \
  "$root/jobscripts/train.sbatch" --strategy zero2)
state=$(wait_job "$id")
[[ "$state" == COMPLETED ]] || fail "train.sbatch job $id ended $state"
json_check "$work/train/metrics.jsonl" 'run["world_size"] == 2 and run["strategy"] == "zero2" and len(steps) == 6 and summary["final_loss"] < steps[0]["loss"]'
[[ -f "$work/train/ckpt/step_00000006/COMPLETE" && -f "$work/train/ckpt/step_00000003/COMPLETE" ]] || fail "train.sbatch: checkpoints missing"
grep -q '^git revision: ' "$work/train-$id.out" || fail "train.sbatch log lacks the git revision"
grep -q '^binary: gpt_train [0-9a-z-]* (' "$work/train-$id.out" || fail "train.sbatch log lacks the binary's --version"
grep -q '^command: srun --mpi=pmix ' "$work/train-$id.out" || fail "train.sbatch log lacks the resolved srun command"
grep -q '^SLURM_JOB_ID=' "$work/train-$id.out" || fail "train.sbatch log lacks the SLURM environment"

echo "== train.sbatch again: requeue-style resume from the newest checkpoint, 3 more steps"
# --steps after the script overrides the script's own (GPT_STEPS=12): a flag
# given twice takes its last value.
id=$(GPT_OUT="$work/train" GPT_CKPT_EVERY=3 GPT_STEPS=12 sbatch --parsable --ntasks=2 --output="$work/resume-%j.out" \
  "$root/jobscripts/train.sbatch" --strategy zero3 --steps 9)
state=$(wait_job "$id")
[[ "$state" == COMPLETED ]] || fail "resumed train.sbatch job $id ended $state"
grep -q 'resumed from .*step_00000006' "$work/resume-$id.out" || fail "the second job did not resume"
[[ -f "$work/train/ckpt/step_00000009/COMPLETE" ]] || fail "resumed job: no step 9 checkpoint"
[[ ! -e "$work/train/ckpt/step_00000012" ]] || fail "resumed job: --steps 9 after the script did not override GPT_STEPS=12"
grep -q 'command line: --steps given 2 times (12, 9): the last is used' "$work/resume-$id.out" ||
  fail "resumed job: no line for the repeated --steps"

# signal_ranks DIR: SIGUSR1 to the ranks of the job writing DIR/metrics.jsonl,
# as SLURM's --signal=USR1@180 does before the time limit. Not `scancel
# --signal=USR1`: on this test cluster it reached the ranks after 1 to 5 s,
# and once (in CI) not before the 20 s run had ended.
signal_ranks() {
  local pid n=0
  for pid in $(pgrep -f "$1/metrics.jsonl"); do
    [[ $(ps -o comm= -p "$pid") == gpt_train ]] && kill -USR1 "$pid" && n=$((n + 1))
  done
  ((n > 0)) || fail "no rank writing $1/metrics.jsonl found"
}

# wait_started ID DIR: until rank 0 has created DIR/metrics.jsonl, which it
# does after the start-up's collectives, so every rank's stop handler is
# installed by then. Signalling then, not after some steps, keeps the test
# independent of how fast this script polls on a busy 2-core machine.
wait_started() {
  for _ in $(seq 1200); do
    [[ -e "$2/metrics.jsonl" ]] && return 0
    sleep 0.05
  done
  fail "job $1: no $2/metrics.jsonl after 60 s"
}

echo "== train.sbatch stopped early by the time-limit warning (--signal=USR1@180: SIGUSR1 to every rank): requeued, resumed, completed"
id=$(GPT_OUT="$work/stop" GPT_CKPT_EVERY=5000 GPT_STEPS=4000 GPT_STOP_MIN_S=0 sbatch --parsable --ntasks=2 \
  --output="$work/stop-%j.out" "$root/jobscripts/train.sbatch" --strategy zero3 --log-every 500)
wait_started "$id" "$work/stop"  # the whole run takes about 20 s
signal_ranks "$work/stop"
state=$(wait_job "$id")
[[ "$state" == COMPLETED ]] || fail "stopped train.sbatch job $id ended $state"
scontrol show job "$id" | grep -q 'Restarts=1' || fail "job $id was not requeued once: $(scontrol show job "$id" | grep -o 'Restarts=[0-9]*')"
grep -q 'requeueing job' "$work/stop-$id.out" || fail "the job log does not say it requeued"
n=$(sed -n 's/.*stopping after step \([0-9]*\) of 4000: SIGUSR1.*/\1/p' "$work/stop-$id.out")
[[ -n "$n" ]] || fail "the first run did not stop on SIGUSR1"
grep -q "resumed from .*step_$(printf %08d "$n")" "$work/stop-$id.out" || fail "the requeued run did not resume from step $n"
json_check "$work/stop/metrics.jsonl" "[r['step'] for r in steps] == list(range(1, 4001)) and [(r['steps_done'], r['stop_signal']) for r in recs if r.get('type') == 'summary'] == [($n, 'SIGUSR1'), (4000, None)]"

echo "== train.sbatch stopped by the clock (GPT_TIME_LIMIT=auto: --time-limit from the job's time left): requeued until done"
# 10 minutes less a margin of 590 s: each piece stops about 10 s after its
# start (SLURM's own USR1@180 would come only after 7 minutes). The 12000
# steps take 18 s on an idle machine, three times that under load.
id=$(GPT_OUT="$work/clock" GPT_CKPT_EVERY=50000 GPT_STEPS=12000 GPT_STOP_MIN_S=0 GPT_TIME_LIMIT=auto GPT_TIME_MARGIN_S=590 \
  sbatch --parsable --ntasks=2 --time=10 --output="$work/clock-%j.out" "$root/jobscripts/train.sbatch" --strategy zero3 \
  --log-every 500)
state=$(wait_job "$id")
[[ "$state" == COMPLETED ]] || fail "train.sbatch job $id with GPT_TIME_LIMIT=auto ended $state"
grep -qE '^time limit: --time-limit 0:(0[0-9]|10) \((59[0-9]|600) s left in the job, less GPT_TIME_MARGIN_S=590\)' "$work/clock-$id.out" ||
  fail "job $id: no 'time limit' line from the job's time left"
grep -q 'stopped early at --time-limit after step' "$work/clock-$id.out" || fail "job $id never stopped at --time-limit"
restarts=$(scontrol show job "$id" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
((restarts >= 1)) || fail "job $id was not requeued"
json_check "$work/clock/metrics.jsonl" "[r['step'] for r in steps] == list(range(1, 12001)) and [r['stop_signal'] for r in recs if r.get('type') == 'summary'] == ['time-limit'] * $restarts + [None]"

echo "== a stop soon after the start (a time limit shorter than the warning's lead time) is not requeued: no requeue loop"
id=$(GPT_OUT="$work/early" GPT_CKPT_EVERY=5000 GPT_STEPS=4000 sbatch --parsable --ntasks=2 \
  --output="$work/early-%j.out" "$root/jobscripts/train.sbatch" --strategy zero3 --log-every 500)
wait_started "$id" "$work/early"
signal_ranks "$work/early"
state=$(wait_job "$id")
[[ "$state" == FAILED ]] || fail "train.sbatch job $id stopped soon after its start ended $state, not FAILED"
[[ "$(exit_code "$id")" == "75:0" ]] || fail "job $id: exit code $(exit_code "$id"), not 75:0"
scontrol show job "$id" | grep -q 'Restarts=0' || fail "job $id, stopped soon after its start, was requeued"
grep -q '^error: the run stopped on a signal [0-9]* s after it started, sooner than GPT_STOP_MIN_S=60 s' "$work/early-$id.out" ||
  fail "job $id: no error line saying why it was not requeued"
n=$(sed -n 's/.*stopping after step \([0-9]*\) of 4000: SIGUSR1.*/\1/p' "$work/early-$id.out")
[[ -n "$n" && -f "$work/early/ckpt/step_$(printf %08d "$n")/COMPLETE" ]] || fail "job $id: no checkpoint of the stop step"

echo "== train.sbatch with mpirun inside the allocation"
id=$(GPT_OUT="$work/train_mpirun" GPT_LAUNCHER=mpirun sbatch --parsable --ntasks=2 --output="$work/mpirun-%j.out" \
  "$root/jobscripts/train.sbatch")
state=$(wait_job "$id")
[[ "$state" == COMPLETED ]] || fail "train.sbatch (mpirun) job $id ended $state"
json_check "$work/train_mpirun/metrics.jsonl" 'run["world_size"] == 2 and len(steps) == 6'

echo "== hybrid-multinode.sbatch: mesh from the allocation (1 node x 4 tasks here)"
id=$(GPT_OUT="$work/hybrid" sbatch --parsable --nodes=1 --ntasks-per-node=4 --output="$work/hybrid-%j.out" \
  "$root/jobscripts/hybrid-multinode.sbatch")
state=$(wait_job "$id")
[[ "$state" == COMPLETED ]] || fail "hybrid-multinode.sbatch job $id ended $state"
json_check "$work/hybrid/metrics.jsonl" 'run["strategy"] == "hybrid" and run["mesh"] == "1x4" and run["world_size"] == 4'
grep -q '^mesh: 1x4' "$work/hybrid-$id.out" || fail "hybrid-multinode.sbatch did not log its mesh"

echo "== submit-sweep.sh: array job + dependent report (one strategy fails on purpose)"
# auto with 1 MiB per rank: nothing fits, and only auto reads device-mem.
{ cat "$work/tiny.toml"; echo 'device-mem = "1M"'; } > "$work/sweep.toml"
out=$(GPT_OUT="$work/sweep" GPT_SWEEP_STRATEGIES=ddp,zero3,hybrid,auto GPT_SWEEP_MESHES=1x2 GPT_STEPS=4 \
  GPT_CONFIG="$work/sweep.toml" GPT_SWEEP_PARALLEL=2 "$root/jobscripts/submit-sweep.sh" --ntasks=2)
echo "$out"
ids=$(grep -o 'job [0-9]*' <<<"$out" | cut -d' ' -f2)
array_id=$(head -1 <<<"$ids"); report_id=$(tail -1 <<<"$ids")
state=$(wait_job "$report_id")
[[ "$state" == COMPLETED ]] || fail "sweep report job $report_id ended $state"
for t in 0 1 2; do
  s=$(wait_job "${array_id}_$t"); [[ "$s" == COMPLETED ]] || fail "sweep task $t ended $s"
done
s=$(wait_job "${array_id}_3"); [[ "$s" == FAILED ]] || fail "sweep task 3 (auto, nothing fits) should fail, ended $s"
python3 - "$work/sweep" <<'PY' || fail "sweep report content"
import csv, sys, os
d = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(d, "report.csv"))))
names = [r["name"] for r in rows]
assert names == ["ddp", "zero3", "hybrid-1x2-zero3", "auto"], names
for r in rows[:3]:
    assert r["status"] == "ok" and float(r["tokens_per_s"]) > 0 and float(r["peak_mib"]) > 0, r
assert rows[3]["status"] == "failed" and "nothing fits" in rows[3]["error"], rows[3]
md = open(os.path.join(d, "report.md")).read()
assert "| auto |" in md and "failed" in md
for p in ("throughput.png", "memory.png", "breakdown.png"):
    f = os.path.join(d, p)
    assert os.path.getsize(f) > 1000 and open(f, "rb").read(4) == b"\x89PNG", p
PY

echo "== a sweep's array task stopped by the time-limit warning (GPT_SWEEP_CKPT_EVERY): requeued, its run resumed"
out=$(GPT_OUT="$work/sweep_stop" GPT_SWEEP_STRATEGIES=ddp GPT_STEPS=4000 GPT_SWEEP_CKPT_EVERY=5000 GPT_STOP_MIN_S=0 \
  GPT_CONFIG="$work/tiny.toml" "$root/jobscripts/submit-sweep.sh" --ntasks=2)
ids=$(grep -o 'job [0-9]*' <<<"$out" | cut -d' ' -f2)
array_id=$(head -1 <<<"$ids"); report_id=$(tail -1 <<<"$ids")
wait_started "${array_id}_0" "$work/sweep_stop/runs/ddp"
signal_ranks "$work/sweep_stop/runs/ddp"
state=$(wait_job "$report_id")
[[ "$state" == COMPLETED ]] || fail "the stopped sweep's report job $report_id ended $state"
s=$(wait_job "${array_id}_0"); [[ "$s" == COMPLETED ]] || fail "the stopped sweep task ended $s"
scontrol show job "${array_id}_0" | grep -q 'Restarts=1' ||
  fail "sweep task ${array_id}_0 was not requeued once: $(scontrol show job "${array_id}_0" | grep -o 'Restarts=[0-9]*')"
python3 - "$work/sweep_stop" <<'PY' || fail "the resumed sweep run"
import csv, json, os, sys
d = sys.argv[1]
row = next(csv.DictReader(open(os.path.join(d, "report.csv"))))
assert row["name"] == "ddp" and row["status"] == "ok" and 0 < int(row["resumed_from"]) < 4000, row
recs = [json.loads(l) for l in open(os.path.join(d, "runs/ddp/metrics.jsonl"))]
assert [r["step"] for r in recs if "type" not in r] == list(range(1, 4001))
assert [(r["steps_done"], r["stop_signal"]) for r in recs if r.get("type") == "summary"] == \
    [(int(row["resumed_from"]), "SIGUSR1"), (4000, None)]
assert "stopped early on SIGUSR1" in open(os.path.join(d, "runs/ddp/log.1.txt")).read()
print(f"sweep task: stopped after step {row['resumed_from']}, requeued, resumed, completed")
PY

echo "== a failing training step fails the job"
id=$(GPT_OUT="$work/bad" sbatch --parsable --ntasks=2 --output="$work/bad-%j.out" \
  "$root/jobscripts/train.sbatch" --data "$work/no_such_*.bin")
state=$(wait_job "$id")
[[ "$state" == FAILED ]] || fail "a job whose training fails ended $state, not FAILED"
[[ "$(exit_code "$id")" != "0:0" ]] || fail "failed job has exit code 0:0"
grep -q "error: .*no_such_" "$work/bad-$id.out" || fail "the failed job's log does not name the bad data"
[[ ! -f "$work/bad/metrics.jsonl" ]] || json_check "$work/bad/metrics.jsonl" 'False'

echo "PASS: every job script ran on SLURM"
