#!/usr/bin/env bash
# scripts/sweep on this machine: 2 ranks, ddp / zero3 / hybrid 1x2 and
# --strategy auto with --device-mem 1M, in which nothing fits (a flag that
# only auto reads, so only that run fails). The report must list all four
# runs in grid order, the failed one with its error, equal final losses for the three good runs
# (same global batch), plan's predictions beside the measurements (communication equal, ddp's peak
# equal, the others' peaks under the bound), and three PNG plots.
#   sweep_report.sh BUILD_DIR WORK_DIR
set -euo pipefail
build="$(realpath "$1")"; work="$(realpath -m "$2")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work"; mkdir -p "$work"
"$root/tests/make_tiny_run.sh" "$build" "$work"  # data/ and tiny.toml
# A grid that cannot run is refused before any run starts: exit 2, one line naming the flag.
refused() {
  local expect=$1; shift
  local rc=0
  "$root/scripts/sweep" run --ranks 2 --steps 3 --config "$work/tiny.toml" --build "$build" --out "$work/refused" \
    --launcher mpirun "$@" >"$work/refused.log" 2>&1 || rc=$?
  [[ $rc == 2 ]] && grep -qF -- "$expect" "$work/refused.log" && [[ ! -e "$work/refused/runs" ]] ||
    { cat "$work/refused.log"; echo "FAIL: sweep $*: exit $rc, expected 2 and '$expect' before any run"; exit 1; }
}
refused "--strategies: unknown strategy 'zero9'" --strategies ddp,zero9
refused "--meshes: 3x3 is 9 ranks, but --ranks is 2" --strategies hybrid --meshes 3x3
refused "--config $work/nope.toml: no such file" --strategies ddp --config "$work/nope.toml"
refused "--ckpt-dir in the flags for gpt_train: every run of the grid would share it" --strategies ddp -- \
  --ckpt-dir "$work/shared_ckpt"
echo "ok: an unknown strategy, a mesh of other ranks, a missing config and a shared --ckpt-dir are refused before any run"
# The flags after -- come after the sweep's own, so one the sweep also gives
# (--log-every) overrides it: gpt_train takes a repeated flag's last value.
"$root/scripts/sweep" run --strategies ddp,zero3,hybrid,auto --meshes 1x2 --ranks 2 --steps 3 \
  --config "$work/tiny.toml" --build "$build" --out "$work/sweep" --launcher mpirun -- --device-mem 1M --log-every 3
python3 - "$work/sweep" <<'PY'
import csv, os, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(d, "report.csv"))))
log = open(os.path.join(d, "runs", "ddp", "log.txt")).read()
assert "command line: --log-every given 2 times (1, 3): the last is used" in log, log
assert " step     1/3 " not in log and " step     3/3 " in log, "--log-every 3 after the sweep's 1 was not the one used"
assert [r["name"] for r in rows] == ["ddp", "zero3", "hybrid-1x2-zero3", "auto"], rows
good = rows[:3]
assert all(r["status"] == "ok" for r in good), good
losses = {r["final_loss"] for r in good}
assert len(losses) == 1, f"strategies disagree on the final loss: {losses}"
assert float(good[1]["model_state_mib"]) < float(good[0]["model_state_mib"]), "zero3 should hold less than ddp"
assert rows[3]["status"] == "failed" and "invalid strategy = 'auto': nothing fits" in rows[3]["error"], rows[3]
# plan's prediction for each run's own config: communication exact everywhere, ddp's peak exact, the others' a bound
for r in good:
    assert r["planned_comm_mib"] == r["comm_mib_per_step"], r
    assert float(r["peak_mib"]) <= float(r["planned_peak_mib"]), r
assert good[0]["planned_peak_mib"] == good[0]["peak_mib"], good[0]
assert rows[3]["planned_peak_mib"] == "", rows[3]
md = open(os.path.join(d, "report.md")).read()
assert "| auto |" in md
for p in ("throughput.png", "memory.png", "breakdown.png", "loss.png"):
    with open(os.path.join(d, p), "rb") as f:
        assert f.read(4) == b"\x89PNG", p
assert "![loss](loss.png)" in md, "the report does not show the loss plot"
# The loss plot's data: one block per good run in grid order, steps 1-3, the same losses (the same global batch);
# no validation points, which the sweep turns off (--val-data '') unless its gpt_train flags turn it on.
def blocks(name):
    out = []
    for b in open(os.path.join(d, name)).read().split("\n\n\n"):
        lines = [l for l in b.strip().splitlines()]
        if lines:
            out.append((lines[0][2:], [tuple(map(float, l.split())) for l in lines[1:]]))
    return out
loss = blocks("loss.dat")
assert [n for n, _ in loss] == ["ddp", "zero3", "hybrid-1x2-zero3"], [n for n, _ in loss]
for n, pts in loss:
    assert [p[0] for p in pts] == [1, 2, 3], (n, pts)
    assert all(abs(a[1] - b[1]) <= 1e-4 * abs(b[1]) for a, b in zip(pts, loss[0][1])), (n, pts, loss[0][1])
assert blocks("val_loss.dat") == [], blocks("val_loss.dat")
assert "Every run's binary was built from `" in md, "the report does not name the binaries' commit"
print("sweep report OK:", os.path.join(d, "report.md"))
PY
# Validation turned on by the gpt_train flags: the loss plot's points are the runs' validation losses, from the
# start's eval record and the step records that validated (steps 0, 2 and 4).
"$root/scripts/sweep" run --strategies ddp,zero2 --ranks 2 --steps 4 --config "$work/tiny.toml" --build "$build" \
  --out "$work/val" --launcher mpirun -- --val-data "$work/data/*_train_*.bin" --eval-every 2 >"$work/val.log" 2>&1 ||
  { cat "$work/val.log"; echo "FAIL: the sweep with validation"; exit 1; }
python3 - "$work/val" <<'PY'
import json, os, sys
d = sys.argv[1]
blocks = [b.strip().splitlines() for b in open(os.path.join(d, "val_loss.dat")).read().split("\n\n\n") if b.strip()]
assert [b[0] for b in blocks] == ["# ddp", "# zero2"], blocks
for b in blocks:
    run = b[0][2:]
    want = [(r["step"], r["val_loss"]) for r in map(json.loads, open(os.path.join(d, "runs", run, "metrics.jsonl")))
            if r.get("type") in (None, "eval") and "val_loss" in r]
    got = [(int(l.split()[0]), float(l.split()[1])) for l in b[1:]]
    assert [s for s, _ in want] == [0, 2, 4] and got == want, (run, got, want)
assert open(os.path.join(d, "loss.png"), "rb").read(4) == b"\x89PNG"
print("ok: the loss plot's validation points are the runs' validation losses at steps 0, 2 and 4")
PY
# Runs of binaries built from different commits: the report says so, naming them.
cp -r "$work/sweep" "$work/mixed"
sed -i '1s/"revision":"[^"]*"/"revision":"0123456789ab"/' "$work/mixed/runs/zero3/metrics.jsonl"
"$root/scripts/sweep" report "$work/mixed" --build "$build" > /dev/null
grep -qF "built from different commits" "$work/mixed/report.md" && grep -qF '`0123456789ab`: zero3' "$work/mixed/report.md" ||
  { cat "$work/mixed/report.md"; echo "FAIL: runs of two builds not reported"; exit 1; }
echo "ok: runs of binaries from two commits are reported as such"

# --skip-done: the same command again keeps the three finished runs and
# reruns only the failed one.
"$root/scripts/sweep" run --strategies ddp,zero3,hybrid,auto --meshes 1x2 --ranks 2 --steps 3 \
  --config "$work/tiny.toml" --build "$build" --out "$work/sweep" --launcher mpirun --skip-done -- --device-mem 1M \
  >"$work/again.log"
kept=$(grep -c 'done before, kept (--skip-done)' "$work/again.log" || true)
started=$(grep -c '^\[sweep\] [a-z0-9-]*: exit ' "$work/again.log" || true)
[[ $kept == 3 && $started == 1 ]] || { cat "$work/again.log"; echo "FAIL: --skip-done kept $kept and ran $started runs, expected 3 and 1"; exit 1; }
echo "ok: --skip-done kept the 3 finished runs and reran the failed one"

# A stopped run stops the sweep: no further run starts, the report says
# 'stopped' (and which step), the sweep exits 75.
#   usr1: SIGUSR1 to mpirun, which forwards it: the run exits 75 after a step;
#   int:  SIGINT to the sweep's process group, as Ctrl-C sends it: the sweep
#         waits for the run (which mpirun ends early) and stops after it;
#   clock: no signal, the run's own --time-limit 0:02 (exit 75 the same way).
first_step() {  # waits until the run's metrics hold a step
  for _ in $(seq 600); do
    grep -q '"grad_norm"' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "FAIL: no step in $1 within 60 s"; exit 1
}
for how in usr1 int clock; do
  extra=(); [[ $how == clock ]] && extra=(-- --time-limit 0:02)
  setsid "$root/scripts/sweep" run --strategies ddp,zero3 --ranks 2 --steps 100000 --config "$work/tiny.toml" \
    --build "$build" --out "$work/stop_$how" --launcher mpirun "${extra[@]}" >"$work/stop_$how.log" 2>&1 &
  pid=$!
  first_step "$work/stop_$how/runs/ddp/metrics.jsonl"
  case $how in
    usr1) kill -USR1 "$(pgrep -P "$pid" mpirun)" ;;
    int) kill -INT -- "-$pid" ;;
  esac
  rc=0; wait "$pid" || rc=$?
  [[ $rc == 75 ]] || { cat "$work/stop_$how.log"; echo "FAIL: $how: the sweep exited $rc, expected 75"; exit 1; }
  python3 - "$work/stop_$how" "$how" <<'PY'
import csv, os, re, sys
d, how = sys.argv[1:]
rows = {r["name"]: r for r in csv.DictReader(open(os.path.join(d, "report.csv")))}
assert rows["ddp"]["status"] == "stopped", rows["ddp"]
want = {"usr1": r"stopped by SIGUSR1 after step \d+ of 100000", "int": r"stopped by SIGINT",
        "clock": r"stopped by --time-limit after step \d+ of 100000"}[how]
assert re.match(want, rows["ddp"]["error"]), rows["ddp"]["error"]
assert rows["zero3"]["status"] == "not run", rows["zero3"]
assert "1 stopped, 1 not run" in open(os.path.join(d, "report.md")).read()
print(f"ok: {how}: ddp {rows['ddp']['error']}; zero3 not run; exit 75")
PY
done

# --ckpt-every: a run stopped by SIGUSR1 (its checkpoint written at the
# stop) resumes with --skip-done from that checkpoint, not from step 0, and
# ends as the same run uninterrupted does, bit for bit; the report says
# where it resumed and the time in checkpoints; the next run starts fresh.
steps=(--ranks 2 --steps 1000 --ckpt-every 400 --config "$work/tiny.toml" --build "$build" --launcher mpirun)
"$root/scripts/sweep" run --strategies ddp "${steps[@]}" --out "$work/whole" > "$work/whole.log"
setsid "$root/scripts/sweep" run --strategies ddp,zero3 "${steps[@]}" --out "$work/resume" >"$work/resume.log" 2>&1 &
pid=$!
first_step "$work/resume/runs/ddp/metrics.jsonl"
kill -USR1 "$(pgrep -P "$pid" mpirun)"
rc=0; wait "$pid" || rc=$?
[[ $rc == 75 ]] || { cat "$work/resume.log"; echo "FAIL: resume: the sweep exited $rc, expected 75"; exit 1; }
grep -q "continue with the same command and --skip-done, which resumes it from its checkpoint$" "$work/resume.log" ||
  { cat "$work/resume.log"; echo "FAIL: the stop does not say how to resume"; exit 1; }
"$root/scripts/sweep" run --strategies ddp,zero3 "${steps[@]}" --out "$work/resume" --skip-done > "$work/resumed.log" ||
  { cat "$work/resumed.log"; echo "FAIL: the resumed sweep failed"; exit 1; }
grep -Eq "^\[sweep\] ddp: resuming from step_[0-9]{8} \(--ckpt-every, --skip-done\)$" "$work/resumed.log" ||
  { cat "$work/resumed.log"; echo "FAIL: ddp did not resume"; exit 1; }
python3 - "$work" <<'PY'
import csv, json, os, sys
w = sys.argv[1]
def summary(d):
    return [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"summary"' in l][-1]
rows = {r["name"]: r for r in csv.DictReader(open(f"{w}/resume/report.csv"))}
ddp, zero3 = rows["ddp"], rows["zero3"]
assert ddp["status"] == "ok" and zero3["status"] == "ok", rows
k = int(ddp["resumed_from"])
assert 0 < k < 1000 and zero3["resumed_from"] == "", rows
assert float(ddp["checkpoint_s"]) > 0 and float(zero3["checkpoint_s"]) > 0, rows
d = f"{w}/resume/runs/ddp"
assert os.path.exists(f"{d}/log.1.txt") and f"stopped early on SIGUSR1 after step {k} " in open(f"{d}/log.1.txt").read()
assert f"resumed from {d}/ckpt/step_{k:08d}" in open(f"{d}/log.txt").read()
steps = [json.loads(l)["step"] for l in open(f"{d}/metrics.jsonl") if '"grad_norm"' in l]
assert steps == list(range(1, 1001)), (steps[:3], steps[-3:], len(steps))
a, b = summary(f"{w}/whole/runs/ddp"), summary(d)
assert a["final_loss"] == b["final_loss"] and a["steps_done"] == b["steps_done"] == 1000, (a, b)
assert sorted(os.listdir(f"{d}/ckpt")) == ["step_00001000"], os.listdir(f"{d}/ckpt")  # --keep-last 1
# sweep.json keeps the first command and lists the continuation, as the report does.
meta = json.load(open(f"{w}/resume/sweep.json"))
assert "--skip-done" not in meta["command"] and len(meta["continued"]) == 1, meta
assert "--skip-done" in meta["continued"][0]["command"], meta
md = open(f"{w}/resume/report.md").read()
assert "- command: `" + meta["command"] + "`" in md and "- continued: `" + meta["continued"][0]["command"] + "`" in md, md
print(f"ok: ddp stopped at step {k}, resumed from its checkpoint, final loss {b['final_loss']} as uninterrupted")
PY
