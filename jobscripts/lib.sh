# Shared by the job scripts (sourced, not run). Everything comes from the
# environment: sbatch passes the submitting shell's variables (--export=ALL),
# so `GPT_STEPS=100 sbatch jobscripts/train.sbatch` works, as do flags after
# the script name, which go to gpt_train after the script's own and so
# override them (gpt_train takes a repeated flag's last value).
#   GPT_ROOT     repository root (default: the directory sbatch was run from)
#   GPT_BUILD    build directory (default: $GPT_ROOT/build); the scripts build nothing
#   GPT_LAUNCHER srun (default inside an allocation) | mpirun
# A failing command fails the job (set -euo pipefail in every script).

gpt_die() {
  echo "error: $*" >&2
  exit 2
}

# Every GPT_* environment variable a script of this repository reads: the job
# scripts' (tests/cli/jobscripts_env.sh checks that none is missing) and the
# device scripts', so that setting one of them is never taken for a typo.
gpt_variables=(GPT_ROOT GPT_BUILD GPT_LAUNCHER GPT_CONFIG GPT_DATA GPT_MODEL GPT_STEPS GPT_OUT GPT_CKPT_EVERY
  GPT_COMM GPT_INNER GPT_TRACE GPT_TIME_LIMIT GPT_TIME_MARGIN_S GPT_STOP_MIN_S GPT_SWEEP_STRATEGIES
  GPT_SWEEP_MESHES GPT_SWEEP_INNER GPT_SWEEP_MODELS GPT_SWEEP_CKPT_EVERY GPT_SWEEP_PARALLEL GPT_CARRY_MPI
  GPT_GIT_REVISION)

# Prints the edits (insertions, deletions, substitutions) from $1 to $2.
gpt_edit_distance() {
  local a="$1" b="$2" i j cost prev=() cur=()
  for ((j = 0; j <= ${#b}; j++)); do prev[j]=$j; done
  for ((i = 1; i <= ${#a}; i++)); do
    cur=("$i")
    for ((j = 1; j <= ${#b}; j++)); do
      [[ "${a:i-1:1}" == "${b:j-1:1}" ]] && cost=0 || cost=1
      cur[j]=$((prev[j - 1] + cost))
      ((prev[j] + 1 < cur[j])) && cur[j]=$((prev[j] + 1))
      ((cur[j - 1] + 1 < cur[j])) && cur[j]=$((cur[j - 1] + 1))
    done
    prev=("${cur[@]}")
  done
  echo "${prev[${#b}]}"
}

# A GPT_* variable in the environment that no script reads, within 2 edits
# of one that does (a sixth of its length for a long one: 3 from
# GPT_SWEEP_STRATEGY to GPT_SWEEP_STRATEGIES), is a typo that would otherwise be ignored
# (GPT_STPES=100 trains the default steps): an error naming both, before
# anything runs. Other GPT_* variables are the user's own and left alone.
gpt_check_env() {
  local v k
  for v in $(compgen -e GPT_ || true); do
    [[ " ${gpt_variables[*]} " == *" $v "* ]] && continue
    for k in "${gpt_variables[@]}"; do
      (($(gpt_edit_distance "$v" "$k") <= (${#k} > 12 ? ${#k} / 6 : 2))) &&
        gpt_die "$v is set, but no job script reads it (did you mean $k?)"
    done
  done
  return 0
}

# Sets root, build and train; checks they exist.
gpt_init() {
  gpt_check_env
  root="${GPT_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}"
  [[ -f "$root/jobscripts/lib.sh" ]] || gpt_die "GPT_ROOT=$root is not the repository (set GPT_ROOT)"
  build="${GPT_BUILD:-$root/build}"
  train="$build/apps/gpt_train"
  [[ -x "$train" ]] || gpt_die "$train not found: build first (scripts/build.sh) or set GPT_BUILD"
  cd "$root"
}

# What a post-mortem needs: where, which code, which allocation, which tuning.
gpt_log_context() {
  echo "job: ${SLURM_JOB_NAME:-local} id ${SLURM_JOB_ID:-none}${SLURM_ARRAY_TASK_ID:+ array task $SLURM_ARRAY_TASK_ID} on $(hostname)"
  echo "git revision: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  # The binary may be older than the tree: it names its own commit (core/build_info.hpp).
  echo "binary: $("${train:-}" --version 2>/dev/null | head -1 || true)"
  echo "date: $(date -Is)"
  env | grep -E '^(SLURM_(JOB|NTASKS|NNODES|NODELIST|CPUS|TASKS|ARRAY|SUBMIT|STEP|MEM)|NCCL_|OMPI_|PMIX_MCA|OMP_|GPT_)' | sort || true
}

# Runs "$@" (gpt_train and its flags) on every task of the allocation.
gpt_launch() {
  local launcher="${GPT_LAUNCHER:-srun}"
  if [[ "$launcher" == srun && -n "${SLURM_JOB_ID:-}" ]] && command -v srun >/dev/null; then
    # Debian's Open MPI is built with PMIx (not PMI-2): srun starts the ranks directly.
    echo "command: srun --mpi=pmix $*"
    srun --mpi=pmix "$@"
  else
    # Inside an allocation Open MPI's mpirun reads the node list from SLURM.
    echo "command: $root/scripts/mpirun.sh -np ${SLURM_NTASKS:-1} $*"
    gpt_forward_usr1 "$root/scripts/mpirun.sh" -np "${SLURM_NTASKS:-1}" "$@"
  fi
}

# Runs "$@" (mpirun, which forwards SIGUSR1 to every rank) in the
# background and passes this shell's SIGUSR1 on to it: SLURM's time-limit
# warning reaches the ranks when it is sent to the batch shell
# (sbatch --signal=B:USR1@180, or scancel --batch --signal=USR1). The
# default --signal=USR1@180 signals job steps only, which an mpirun started
# by the batch shell is not. Returns the launcher's exit status.
gpt_forward_usr1() {
  local pid rc
  "$@" &
  pid=$!
  trap 'kill -USR1 "$pid" 2>/dev/null' USR1
  while :; do
    rc=0
    wait "$pid" || rc=$?
    # A trapped signal interrupts wait (status > 128) while the launcher runs on.
    ((rc > 128)) && kill -0 "$pid" 2>/dev/null && continue
    break
  done
  trap - USR1
  return "$rc"
}

# Runs gpt_train ("$@") with gpt_launch. A run that stops early on a signal
# exits 75 after checkpointing the step it stopped after: the warning the
# job scripts ask SLURM to send every rank 180 s before the time limit
# (#SBATCH --signal=USR1@180), `scancel --signal=USR1 JOB`, or a
# preemption's SIGTERM; or at gpt_train's own --time-limit. With
# checkpoints on (GPT_CKPT_EVERY, which also sets --resume auto) the job
# then requeues itself and resumes from that checkpoint; without them it
# fails with 75.
#
# Not when the run stopped sooner than GPT_STOP_MIN_S (60) after it
# started: that is a time limit shorter than the warning's lead time, and
# requeueing would repeat forever, a step at a time.
gpt_train_or_requeue() {
  local rc=0 start=$SECONDS
  gpt_launch "$@" || rc=$?
  gpt_requeue_stopped "$rc" "$start" "${GPT_CKPT_EVERY:-}"
}

# gpt_requeue_stopped RC START CHECKPOINTS: returns RC, unless RC is 75 (a
# run stopped early on a signal, with its checkpoint), CHECKPOINTS is not
# empty (so the requeued job resumes rather than starts over) and the stop
# came at least GPT_STOP_MIN_S after START (bash's $SECONDS): then the job
# (an array task: that task) requeues itself. gpt_train_or_requeue for
# gpt_train; sweep.sbatch for its run of the grid (GPT_SWEEP_CKPT_EVERY).
gpt_requeue_stopped() {
  local rc=$1 start=$2 min="${GPT_STOP_MIN_S:-60}"
  [[ $rc == 75 && -n "$3" && -n "${SLURM_JOB_ID:-}" ]] || return "$rc"
  if ((SECONDS - start < min)); then
    echo "error: the run stopped on a signal $((SECONDS - start)) s after it started, sooner than" \
      "GPT_STOP_MIN_S=$min s: is the time limit shorter than the --signal lead time (180 s)? Not requeueing" >&2
    return "$rc"
  fi
  echo "stopped early with a checkpoint: requeueing job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0} ended)"
  scontrol requeue "$SLURM_JOB_ID" || gpt_die "scontrol requeue $SLURM_JOB_ID failed (is the job --requeue?)"
  exit 0  # not reached when SLURM ends this script as it requeues the job
}

# The seconds SLURM gives this job still (squeue's %L: [D-][HH:]MM:SS);
# nothing for a job without a limit (UNLIMITED) or outside SLURM.
gpt_time_left_s() {
  local left
  [[ -n "${SLURM_JOB_ID:-}" ]] || return 0
  left=$(squeue -h -j "$SLURM_JOB_ID" -o %L) || gpt_die "squeue -j $SLURM_JOB_ID -o %L failed (GPT_TIME_LIMIT=auto)"
  [[ $left =~ ^(([0-9]+)-)?(([0-9]+):)?([0-9]+):([0-9]+)$ ]] || return 0
  echo $(( ((10#${BASH_REMATCH[2]:-0} * 24 + 10#${BASH_REMATCH[4]:-0}) * 60 + 10#${BASH_REMATCH[5]}) * 60 \
    + 10#${BASH_REMATCH[6]} ))
}

# gpt_train's --time-limit from GPT_TIME_LIMIT: a TIME as gpt_train takes it
# (SLURM's --time forms), or auto: the job's time left as the script starts
# less GPT_TIME_MARGIN_S (default 300) for the stop's checkpoint and the
# start-up before gpt_train's clock starts. Sets `limit` ("" for none).
gpt_time_limit() {
  limit="${GPT_TIME_LIMIT:-}"
  [[ $limit == auto ]] || return 0
  local left margin="${GPT_TIME_MARGIN_S:-300}"
  left=$(gpt_time_left_s) || exit 2
  if [[ -z $left ]]; then
    limit=""
    echo "time limit: GPT_TIME_LIMIT=auto, but the job has none: no --time-limit"
    return 0
  fi
  ((left > margin)) || gpt_die "GPT_TIME_LIMIT=auto: the job has ${left} s left, not more than GPT_TIME_MARGIN_S=$margin"
  limit=$(printf '%d:%02d' $(((left - margin) / 60)) $(((left - margin) % 60)))
  echo "time limit: --time-limit $limit (${left} s left in the job, less GPT_TIME_MARGIN_S=$margin)"
}

# gpt_train flags from GPT_* variables (empty ones are left to the config).
#   GPT_CONFIG (default input/default.toml) GPT_MODEL GPT_DATA GPT_STEPS
#   GPT_OUT (default runs/$SLURM_JOB_ID): metrics.jsonl, ckpt/, trace.json
#   GPT_CKPT_EVERY (checkpoint every N steps, resume from the newest: requeue-safe)
#   GPT_TRACE=1 (write $GPT_OUT/trace.json)
#   GPT_STOP_MIN_S (default 60: see gpt_train_or_requeue)
#   GPT_TIME_LIMIT (a --time-limit, or auto), GPT_TIME_MARGIN_S (default 300): see gpt_time_limit
gpt_train_args() {
  out="${GPT_OUT:-$root/runs/${SLURM_JOB_ID:-local}}"
  mkdir -p "$out"
  args=(--config "${GPT_CONFIG:-$root/input/default.toml}" --metrics "$out/metrics.jsonl")
  [[ -n "${GPT_MODEL:-}" ]] && args+=(--model "$GPT_MODEL")
  [[ -n "${GPT_DATA:-}" ]] && args+=(--data "$GPT_DATA")
  [[ -n "${GPT_STEPS:-}" ]] && args+=(--steps "$GPT_STEPS")
  [[ -n "${GPT_CKPT_EVERY:-}" ]] && args+=(--ckpt-dir "$out/ckpt" --ckpt-every "$GPT_CKPT_EVERY" --resume auto)
  [[ "${GPT_TRACE:-0}" == 1 ]] && args+=(--trace "$out/trace.json")
  gpt_time_limit
  [[ -n "$limit" ]] && args+=(--time-limit "$limit")
  return 0
}

# Sets `grid`: the `scripts/sweep` grid flags from GPT_SWEEP_* (see sweep.sbatch).
gpt_sweep_grid() {
  grid=(--strategies "${GPT_SWEEP_STRATEGIES:-ddp,zero1,zero2,zero3,hybrid}"
        --hybrid-inner "${GPT_SWEEP_INNER:-zero3}" --steps "${GPT_STEPS:-20}" --config "${GPT_CONFIG:-$root/input/default.toml}")
  [[ -n "${GPT_SWEEP_MESHES:-}" ]] && grid+=(--meshes "$GPT_SWEEP_MESHES")
  [[ -n "${GPT_SWEEP_MODELS:-}" ]] && grid+=(--models "$GPT_SWEEP_MODELS")
  [[ -n "${GPT_SWEEP_CKPT_EVERY:-}" ]] && grid+=(--ckpt-every "$GPT_SWEEP_CKPT_EVERY" --skip-done)
  return 0
}
