#!/usr/bin/env bash
# What the NCCL communicator reports of its collectives' times (ctest
# emulated.comm_timing): comm.time_s from each collective's events on its
# stream, comm.exposed_s from how long the compute stream waited for it, and
# with --trace the collectives at the GPU's times (nccl_communicator.hpp).
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
#    collective it waited for ended.
#   comm_timing.sh BUILD_DIR WORK_DIR EMULATED_TRAINER
set -euo pipefail
export GPT_EMULATED_DEVICES=2  # one emulated GPU per rank, for NCCL
build="$1"; work="$2"; trainer="$3"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
"$here/../make_tiny_run.sh" "$build" "$work" >/dev/null  # global batch 8, micro-batch 2
steps=4
run() {  # NAME ORDER STRATEGY [ARGS...]
  local name="$1" order="$2" strategy="$3"; shift 3
  GPT_EMULATED_STREAMS="$order" "$here/../../scripts/mpirun.sh" -np 2 "$trainer" --config "$work/tiny.toml" --n-head 2 \
    --device cuda --comm nccl --strategy "$strategy" --steps $steps --metrics "$work/$name.jsonl" "$@" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; echo "FAILED: $name"; exit 1; }
}
run program_zero3 program zero3
run program_ddp program ddp
run lazy_ddp lazy ddp
run lazy_zero3 lazy zero3 --trace "$work/lazy_zero3.json"

python3 - "$work" $steps <<'PY'
import json, sys
work, steps = sys.argv[1], int(sys.argv[2])
failures = []
def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)

def records(name):
    rows = [json.loads(line) for line in open(f"{work}/{name}.jsonl")]
    return [r for r in rows if "comm" in r and "step" in r], next(r for r in rows if r.get("type") == "summary")

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

rows, s = records("lazy_zero3")
calls = sum(r["comm"]["calls"] for r in rows)
trace = json.load(open(f"{work}/lazy_zero3.json"))["traceEvents"]
lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name"}
for rank in (0, 1):
    mine = [e for e in trace if e["pid"] == rank and e["ph"] != "M"]
    ops = ("all_reduce", "reduce_scatter", "all_gather")
    runs = [e for e in mine if e["ph"] == "X" and e["name"] in ops]
    begins = {e["id"]: e for e in mine if e["ph"] == "b" and e["name"] in ops}
    ends = {e["id"]: e for e in mine if e["ph"] == "e" and e["name"] in ops}
    check(len(runs) == calls and len(begins) == calls and set(begins) == set(ends),
          f"rank {rank}: {len(runs)} collectives on the comm lanes, {len(begins)} async slices; the metrics: {calls}")
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
    check(len(paired) == calls and not late, f"rank {rank}: no collective runs before the host issued it (µs; {len(late)} do)")
    check(all(abs(e["ts"] - (r["ts"] + r["dur"])) < 1 for r, (b, e) in paired),
          f"rank {rank}: each async slice ends where its run ends")
    stalls = [e for e in mine if e["ph"] == "X" and e["name"].startswith("wait ")]
    run_ends = [(r["name"], r["ts"] + r["dur"]) for r in runs]
    matched = [w for w in stalls if any(n == w["name"][5:] and abs(t - (w["ts"] + w["dur"])) < 1 for n, t in run_ends)]
    check(stalls and len(matched) == len(stalls) and all(lanes[(rank, w["tid"])].endswith(": compute stream waiting")
                                                       for w in stalls),
          f"rank {rank}: {len(stalls)} stalls of the compute stream, each ending with its collective ({len(matched)})")
sys.exit(1 if failures else 0)
PY
