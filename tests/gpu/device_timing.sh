#!/usr/bin/env bash
# The GPU's own times in what a run reports (ctest emulated.device_timing):
# NCCL's comm.time_s from each collective's events on its stream, its
# comm.exposed_s from how long the compute stream waited for it, and with
# --trace the collectives and the training loop's spans at the GPU's times
# (nccl_communicator.hpp, strategies/cuda/stream_marks.hpp).
# On the emulated backend, whose stream orders decide what a wait finds:
#  * program order (every operation runs when it is queued): each collective
#    has finished before the compute stream reaches its wait, so nothing is
#    exposed: exposed_s is exactly 0 in every step, time_s is not;
#  * lazy order (work runs only when the host needs it): the compute stream
#    reaches each wait before the collective has run, so for ddp, whose
#    all-reduces all end the backward, most of the time is exposed;
#  * the trace of a lazy zero3 run has every collective of every step (the
#    metrics' calls per step), each on its communicator's lane no earlier
#    than the host issued it, its async slice from issue to the end of the
#    lane's slice, and each stall of the compute stream ending where the
#    collective it waited for ended; and the lane "GPU compute stream" has
#    a slice for every span of the training loop's lane (same names, same
#    counts), none starting before the host enqueued it, each inside its
#    step's, but for the startup slices (the initial values), which end
#    before step 1 begins.
# On a GPU (no EMULATED_TRAINER; ctest gpu.device_timing) only the last
# check's GPU lane, on 1 rank (NCCL has one rank per GPU), with the real
# trainer; exits 77 (skipped) without a GPU.
#   device_timing.sh BUILD_DIR WORK_DIR [EMULATED_TRAINER]
set -euo pipefail
export GPT_EMULATED_DEVICES=2  # one emulated GPU per rank, for NCCL
build="$1"; work="$2"; emulated="${3:-}"
trainer="${emulated:-$build/apps/gpt_train}"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
"$here/../make_tiny_run.sh" "$build" "$work" >/dev/null  # global batch 8, micro-batch 2
steps=4
run() {  # NAME ORDER NP STRATEGY [ARGS...]
  local name="$1" order="$2" np="$3" strategy="$4"; shift 4
  GPT_EMULATED_STREAMS="$order" "$here/../../scripts/mpirun.sh" -np "$np" "$trainer" --config "$work/tiny.toml" \
    --n-head 2 --device cuda --strategy "$strategy" --steps $steps --metrics "$work/$name.jsonl" "$@" \
    > "$work/$name.log" 2>&1 || {
      if [ -z "$emulated" ] && grep -q "no CUDA device" "$work/$name.log"; then
        echo "skipped: no CUDA device"; exit 77
      fi
      cat "$work/$name.log"; echo "FAILED: $name"; exit 1; }
}
if [ -n "$emulated" ]; then
  run program_zero3 program 2 zero3 --comm nccl
  run program_ddp program 2 ddp --comm nccl
  run lazy_ddp lazy 2 ddp --comm nccl
  run traced lazy 2 zero3 --comm nccl --trace "$work/traced.json"
else
  run traced "" 1 zero3 --trace "$work/traced.json"
fi

python3 - "$work" $steps "${emulated:+nccl}" <<'PY'
import collections, json, sys
work, steps, nccl = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "nccl"
failures = []
def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)

def records(name):
    rows = [json.loads(line) for line in open(f"{work}/{name}.jsonl")]
    return [r for r in rows if "comm" in r and "step" in r], next(r for r in rows if r.get("type") == "summary")

if nccl:
    for name in ("program_zero3", "program_ddp"):
        rows, _ = records(name)
        check(len(rows) == steps and all(r["comm"]["time_s"] > 0 and r["comm"]["exposed_s"] == 0 for r in rows),
              f"{name}: every step's time_s > 0 and exposed_s exactly 0: "
              + ", ".join(f"{r['comm']['time_s']:.2e}/{r['comm']['exposed_s']:.2e}" for r in rows))
    rows, s = records("lazy_ddp")
    check(all(r["comm"]["exposed_s"] > 0.5 * r["comm"]["time_s"] > 0 for r in rows),
          "lazy_ddp: every step's exposed_s above half its time_s: "
          + ", ".join(f"{r['comm']['exposed_s']:.2e}/{r['comm']['time_s']:.2e}" for r in rows))
    check(s["overlap"] < 0.5, f"lazy_ddp: the summary's overlap {s['overlap']:.3f} < 0.5")

rows, s = records("traced")
calls = sum(r["comm"]["calls"] for r in rows)
trace = json.load(open(f"{work}/traced.json"))["traceEvents"]
lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name"}
for rank in sorted({e["pid"] for e in trace}):
    mine = [e for e in trace if e["pid"] == rank and e["ph"] != "M"]
    if nccl:  # collectives: 2 ranks of the emulator
        ops = ("all_reduce", "reduce_scatter", "all_gather")
        runs = [e for e in mine if e["ph"] == "X" and e["name"] in ops]
        begins = {e["id"]: e for e in mine if e["ph"] == "b" and e["name"] in ops}
        ends = {e["id"]: e for e in mine if e["ph"] == "e" and e["name"] in ops}
        check(len(runs) == calls and len(begins) == calls and set(begins) == set(ends),
              f"rank {rank}: {len(runs)} collectives on the comm lanes, {len(begins)} async slices; "
              f"the metrics: {calls}")
        check(all(lanes[(rank, e["tid"])].startswith("comm ") and e["dur"] >= 0 for e in runs),
              f"rank {rank}: every collective on a 'comm ...' lane, of non-negative length")
        # The k-th async slice of a lane belongs to its k-th run: both in the
        # order the communicator read them (its issue order).
        by_lane = {}
        for e in runs:
            by_lane.setdefault(e["tid"], []).append(e)
        asyncs = {}
        for i in sorted(begins):
            asyncs.setdefault(begins[i]["tid"], []).append((begins[i], ends[i]))
        paired = [(r, a) for t in by_lane for r, a in zip(by_lane[t], asyncs.get(t, []))]
        late = [r for r, (b, e) in paired if r["ts"] < b["ts"] - 50]
        check(len(paired) == calls and not late,
              f"rank {rank}: no collective runs before the host issued it ({len(late)} do)")
        check(all(abs(e["ts"] - (r["ts"] + r["dur"])) < 1 for r, (b, e) in paired),
              f"rank {rank}: each async slice ends where its run ends")
        stalls = [e for e in mine if e["ph"] == "X" and e["name"].startswith("wait ")]
        run_ends = [(r["name"], r["ts"] + r["dur"]) for r in runs]
        ends_with_run = lambda w: any(n == w["name"][5:] and abs(t - (w["ts"] + w["dur"])) < 1 for n, t in run_ends)
        matched = [w for w in stalls if ends_with_run(w)]
        on_lane = all(lanes[(rank, w["tid"])].endswith(": compute stream waiting") for w in stalls)
        check(stalls and len(matched) == len(stalls) and on_lane,
              f"rank {rank}: {len(stalls)} stalls of the compute stream, each ending with its collective "
              f"({len(matched)})")
    host = [e for e in mine if e["ph"] == "X" and lanes[(rank, e["tid"])] == "train"
            and not e["name"].startswith("wait ")]
    gpu = [e for e in mine if e["ph"] == "X" and lanes[(rank, e["tid"])] == "GPU compute stream"]
    count = lambda xs: collections.Counter(e["name"] for e in xs)
    check(gpu and count(gpu) == count(host),
          f"rank {rank}: the GPU's lane has the loop's {len(host)} slices, name for name ({len(gpu)})")
    # The k-th GPU slice of a name is the k-th host slice of that name.
    early = 0
    for name in {e["name"] for e in host}:
        for h, g in zip([e for e in host if e["name"] == name], [e for e in gpu if e["name"] == name]):
            early += g["ts"] < h["ts"] - 50
    check(early == 0, f"rank {rank}: no GPU slice starts before the host enqueued its span ({early} do)")
    steps_gpu = [e for e in gpu if e["name"].startswith("step.")]
    # What the run does before its loop (the initial values, a checkpoint's read) is on the lane too, as
    # 'startup' slices: each ends before the first step begins; every other slice is inside a step.
    startup = [e for e in gpu if e.get("cat") == "startup"]
    first = min((s["ts"] for s in steps_gpu), default=0)
    late_startup = [e for e in startup if e["ts"] + e["dur"] > first + 1]
    check(startup and not late_startup,
          f"rank {rank}: {len(startup)} startup GPU slices ({', '.join(sorted({e['name'] for e in startup}))}), "
          f"each ending before step 1 ({len(late_startup)} do not)")
    outside = [e for e in gpu if not e["name"].startswith("step.") and e.get("cat") != "startup"
               and not any(s["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1 for s in steps_gpu)]
    check(len(steps_gpu) == steps and not outside,
          f"rank {rank}: {len(steps_gpu)} GPU step slices; every other GPU slice inside one ({len(outside)} outside)")
sys.exit(1 if failures else 0)
PY
