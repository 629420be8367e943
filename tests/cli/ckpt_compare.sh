#!/usr/bin/env bash
# ckpt_tool compare A B [--tolerance X]: two checkpoints' states, tensor by
# tensor, whatever strategies and world sizes wrote them.
#   1. a checkpoint against itself: identical, exit 0;
#   2. ddp against zero3 on 2 ranks, step 6: not bit for bit (their
#      reductions add in other orders), exit 1; within a tolerance of 1e-3,
#      exit 0; at 1e-5 the QKV bias (near zero) is above it, and --atol 1e-5
#      takes it; the header lines name each side's step, strategy and ranks;
#   3. the numbers: step 3 against step 6 of one run, wte's differing
#      elements, largest |a - b| and ||a - b|| / ||a|| equal what Python
#      computes from the two checkpoints' llm.c exports (ckpt_tool export
#      --format llmc: the same parameters as raw floats);
#   4. checkpoints of different models: one error line naming both, exit 1;
#   5. the runs' metrics: a {"type": "checkpoint"} record per checkpoint
#      (step, path, bytes = the directory's files, write seconds, blocked_s:
#      the write itself, or with --ckpt-async (zero3's run) the snapshot,
#      independent_io 0), the log's line with size and rate, and the
#      summary's count and time in checkpoints (their blocked_s, plus the
#      waits for the background writer);
#   6. ddp with --ckpt-async on 2 ranks snapshots each rank's share alone
#      (the half it writes: snapshot_bytes and mem.buffers about 6 bytes a
#      parameter, not 12; 0 when synchronous), and its checkpoint equals the
#      synchronous run's bit for bit.
#   ckpt_compare.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
tool="$build/apps/ckpt_tool"
tiny_run_ok ddp 2 --strategy ddp --ckpt-dir "$work/ck_ddp" --ckpt-every 3 --metrics "$work/ddp.jsonl"
tiny_run_ok zero3 2 --strategy zero3 --ckpt-dir "$work/ck_zero3" --ckpt-every 3 --ckpt-async --metrics "$work/zero3.jsonl"
tiny_run_ok ddp_async 2 --strategy ddp --ckpt-dir "$work/ck_ddp_async" --ckpt-every 3 --ckpt-async \
  --metrics "$work/ddp_async.jsonl"
ddp3="$work/ck_ddp/step_00000003"; ddp6="$work/ck_ddp/step_00000006"; zero6="$work/ck_zero3/step_00000006"

# 1. itself
out=$("$tool" compare "$ddp6" "$ddp6") || { echo "$out"; fail "a checkpoint against itself: exit $?"; }
grep -q "^identical: all 84 tensors bit for bit$" <<<"$out" || { echo "$out"; fail "a checkpoint against itself: not identical"; }

# 2. two strategies
if out=$("$tool" compare "$ddp6" "$zero6"); then echo "$out"; fail "ddp against zero3 at tolerance 0: exit 0"; fi
grep -q "^different: [0-9]* of 84 tensors differ" <<<"$out" || { echo "$out"; fail "ddp against zero3: no 'different' line"; }
grep -q "^a: .*step_00000006: step 6, ddp on 2 ranks (mesh 1x2), data position epoch 0 offset 48, seed 1337$" <<<"$out" &&
  grep -q "^b: .*step_00000006: step 6, zero3 on 2 ranks (mesh 1x2)" <<<"$out" || { echo "$out"; fail "the a/b lines"; }
out=$("$tool" compare "$ddp6" "$zero6" --tolerance 1e-3) || { echo "$out"; fail "ddp against zero3 within 1e-3: exit 1"; }
grep -q "^within tolerance: [0-9]* of 84 tensors differ, 0 above --tolerance 0.001;" <<<"$out" ||
  { echo "$out"; fail "ddp against zero3 within 1e-3: no 'within tolerance' line"; }
# Near-zero tensors (the QKV bias) differ by 1e-4 relative at 1e-6 absolute: above --tolerance 1e-5, within
# --atol 1e-5 beside it.
if out=$("$tool" compare "$ddp6" "$zero6" --tolerance 1e-5); then echo "$out"; fail "ddp against zero3 within 1e-5: exit 0"; fi
grep -q "attn.c_attn.bias .* ABOVE TOLERANCE$" <<<"$out" || { echo "$out"; fail "within 1e-5: the QKV bias not listed"; }
out=$("$tool" compare "$ddp6" "$zero6" --tolerance 1e-5 --atol 1e-5) ||
  { echo "$out"; fail "ddp against zero3 within 1e-5 or 1e-5 absolute: exit 1"; }
grep -q "^within tolerance: [0-9]* of 84 tensors differ, 0 above --tolerance 1e-05 and --atol 1e-05;" <<<"$out" ||
  { echo "$out"; fail "--atol: no 'within tolerance' line"; }
echo "ok: identical to itself; ddp and zero3 differ in the last bits, within 1e-3, or 1e-5 and 1e-5 absolute"

# 3. the numbers, against the llm.c exports
"$tool" compare "$ddp3" "$ddp6" --json "$work/c.json" > "$work/c.txt" && fail "step 3 against step 6: exit 0"
"$tool" export --format llmc "$ddp3" "$work/a.bin" > /dev/null && "$tool" export --format llmc "$ddp6" "$work/b.bin" > /dev/null ||
  fail "the llm.c exports"
python3 - "$work" <<'PY' || fail "compare's numbers are not the exports'"
import json, math, struct, sys
w = sys.argv[1]
def wte(path):
    raw = open(path, "rb").read()
    head = struct.unpack("256i", raw[:1024])
    V, C, Vp = head[3], head[6], head[7]
    return list(struct.unpack(f"{Vp * C}f", raw[1024:1024 + 4 * Vp * C]))[:V * C]
a, b = wte(f"{w}/a.bin"), wte(f"{w}/b.bin")
j = json.load(open(f"{w}/c.json"))
t = next(x for x in j["tensors"] if x["name"] == "params/transformer.wte.weight")
differing = sum(1 for x, y in zip(a, b) if struct.pack("f", x) != struct.pack("f", y))
max_abs = max(abs(x - y) for x, y in zip(a, b))
rel = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(x * x for x in a))
assert t["numel"] == len(a) and t["differing"] == differing, (t, differing)
assert t["max_abs"] == max_abs, (t["max_abs"], max_abs)
assert abs(t["rel"] - rel) <= 1e-12 * rel, (t["rel"], rel)
assert not j["identical"] and not j["within_tolerance"] and j["a"]["step"] == 3 and j["b"]["step"] == 6, j["a"]
print(f"wte: {differing} of {len(a)} differ, max |a-b| {max_abs:.3g}, rel {rel:.3g}, as ckpt_tool says")
PY

# 4. another model
tiny_run_ok other 1 --n-layer 1 --steps 1 --global-batch 2 --ckpt-dir "$work/ck_other"
if out=$("$tool" compare "$ddp6" "$work/ck_other/step_00000001" 2>&1); then echo "$out"; fail "different models: exit 0"; fi
grep -q "^error: .*step_00000006 and .*step_00000001 hold different models: " <<<"$out" || { echo "$out"; fail "different models: the error line"; }
[ "$(wc -l <<<"$out")" = 1 ] || { echo "$out"; fail "different models: more than one line"; }

# 5. the metrics' checkpoint records
grep -Eq "checkpoint .*/ck_ddp/step_00000006 written in [0-9.]+ s \([0-9.]+ MiB, [0-9]+ MiB/s\)$" "$work/ddp.log" ||
  { cat "$work/ddp.log"; fail "ddp: no 'written in' line with size and rate"; }
grep -Eq "checkpoint .*/ck_zero3/step_00000006 written in [0-9.]+ s \([0-9.]+ MiB, [0-9]+ MiB/s\) \(background\)$" \
  "$work/zero3.log" || { cat "$work/zero3.log"; fail "zero3: no background 'written in' line"; }
python3 - "$work" <<'PY' || fail "the checkpoint records"
import json, os, sys
w = sys.argv[1]
for name, asynchronous in (("ddp", False), ("zero3", True)):
    recs = [json.loads(l) for l in open(f"{w}/{name}.jsonl")]
    ck = [r for r in recs if r.get("type") == "checkpoint"]
    assert [r["step"] for r in ck] == [3, 6], (name, ck)
    for r in ck:
        d = r["path"]
        files = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        assert d.endswith(f"/ck_{name}/step_{r['step']:08d}") and r["bytes"] == files, (r, files)
        assert r["async"] is asynchronous and r["independent_io"] == 0 and r["seconds"] > 0 and r["blocked_s"] > 0, r
        assert asynchronous or r["blocked_s"] == r["seconds"], r
    # Each record follows its step's; a background one the first step's after it was published (or the end's).
    at = {(r.get("type", "step"), r.get("step")): i for i, r in enumerate(recs)}
    assert at[("step", 3)] < at[("checkpoint", 3)] < at[("step", 6)] < at[("checkpoint", 6)] or \
        asynchronous and at[("step", 3)] < at[("checkpoint", 3)] < at[("checkpoint", 6)] < at[("summary", None)], at
    summary = recs[-1]
    blocked = sum(r["blocked_s"] for r in ck)
    assert summary["type"] == "summary" and summary["checkpoints"] == 2, summary
    assert (summary["checkpoint_blocked_s"] >= blocked - 1e-9 if asynchronous
            else abs(summary["checkpoint_blocked_s"] - blocked) <= 1e-9), (summary["checkpoint_blocked_s"], blocked)
    print(f"{name}: checkpoint records at steps 3 and 6, {ck[0]['bytes']} bytes each, "
          f"{summary['checkpoint_blocked_s']:.3f} s of the loop in them")
PY
grep -q "2 checkpoints | the training loop spent [0-9.]* s in them$" "$work/ddp.log" || fail "ddp: the summary's line"

# 6. the async snapshot holds the written share
out=$("$tool" compare "$ddp6" "$work/ck_ddp_async/step_00000006") ||
  { echo "$out"; fail "ddp's async checkpoint against its synchronous one: exit $?"; }
grep -q "^identical: all 84 tensors bit for bit$" <<<"$out" || { echo "$out"; fail "ddp async against sync: not identical"; }
grep -Eq "checkpoint step 3: state snapshot \([0-9.]+ MiB\) in [0-9.]+ s, writing in the background$" \
  "$work/ddp_async.log" || { cat "$work/ddp_async.log"; fail "ddp async: no snapshot line with its size"; }
python3 - "$work" <<'PY' || fail "the snapshots' sizes"
import json, sys
w = sys.argv[1]
units_max = 64  # the tiny model's units (2 layers): far fewer
for name, share in (("ddp", None), ("zero3", 2), ("ddp_async", 2)):
    recs = [json.loads(l) for l in open(f"{w}/{name}.jsonl")]
    psi = recs[0]["params_stored"]
    ck = [r for r in recs if r.get("type") == "checkpoint"]
    for r in ck:
        b = r["snapshot_bytes"]
        if share is None:
            assert b == 0, (name, r)
        else:  # rank 0's: 12 bytes for each element of its half (the larger: rounded up) of every unit
            assert 12 * psi / share <= b <= 12 * (psi / share + units_max), (name, b, psi)
    if name == "ddp_async":  # the snapshot is the run's only transient buffer: 12 bytes per element, 1 at least
        # (each step record after the first checkpoint, made at step 3 after its record)
        buffers = [r["mem"]["buffers"] for r in recs if r.get("type", "step") == "step" and r["step"] > 3]
        assert all(ck[0]["snapshot_bytes"] <= x <= ck[0]["snapshot_bytes"] + 12 * units_max for x in buffers), \
            (buffers, ck[0])
        print(f"ddp --ckpt-async on 2 ranks: a {ck[0]['snapshot_bytes']}-byte snapshot of {12 * psi} bytes of state, "
              f"mem.buffers {buffers[0]}")
PY
echo "ok: ckpt_tool compare"
