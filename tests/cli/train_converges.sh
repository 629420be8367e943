#!/usr/bin/env bash
# The issue's acceptance run: the tiny model on byte-level tinyshakespeare
# goes from loss ~5.5 to a validation loss under 2.8 within a few hundred
# steps. On the way, HellaSwag-format examples from the text's last 100 KB
# (the right ending against its own characters shuffled,
# tests/make_hellaswag.py): at chance before training, mostly right after.
# Exit 77 (ctest: skipped) when the shared data is not present.
#   train_converges.sh BUILD_DIR SHARED_DATA_DIR
set -euo pipefail
build="$1"; shared="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
txt="$shared/tinyshakespeare.txt"
[[ -f "$txt" ]] || { echo "skip: $txt not present"; exit 77; }
work="$build/test_converge"; rm -rf "$work"; mkdir -p "$work"
"$build/apps/prepare_data" --input "$txt" --out "$work" --name shk --val-fraction 0.1
tail -c 100000 "$txt" > "$work/tail.txt"
python3 "$root/tests/make_hellaswag.py" "$work/tail.txt" "$work/hellaswag.jsonl" 150
"$root/scripts/mpirun.sh" -np 1 "$build/apps/gpt_train" --model tiny --data "$work/shk_train_*.bin" \
  --val-data "$work/shk_val_*.bin" --steps 200 --global-batch 16 --micro-batch 8 --lr 3e-3 --min-lr 3e-4 \
  --warmup 10 --eval-every 100 --val-batches 16 --log-every 50 --sample-tokens 0 --metrics "$work/metrics.jsonl" \
  --hellaswag "$work/hellaswag.jsonl" --hellaswag-examples 100 2>&1 | tee "$work/log.txt"
python3 - "$work/metrics.jsonl" "$work/log.txt" <<'PY'
import json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs[0]["type"] == "run" and recs[0]["params"] > 0, recs[0]
steps = [r for r in recs if "type" not in r]
assert recs[-1]["type"] == "summary" and recs[-1]["tokens_per_s"] > 0, recs[-1]
first, last = steps[0], steps[-1]
print(f"first loss {first['loss']:.3f}, last loss {last['loss']:.3f}, val loss {last['val_loss']:.3f}")
assert 5.0 < first["loss"] < 6.0, "initial loss should be ~ln(256) = 5.55"
assert last["val_loss"] < 2.8, "validation loss must fall under 2.8"
for k in ("step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "step_time_s", "mem", "comm"):
    assert k in last, k
assert last["mem"]["params"] == recs[0]["params_stored"] * 4
# Before training: the metrics' {"type": "eval"} record of step 0, as the log says it.
start = [r for r in recs if r.get("type") == "eval"]
assert len(start) == 1 and start[0]["step"] == 0 and recs.index(start[0]) < recs.index(steps[0]), start
before = start[0]["hellaswag"]["acc_norm"]
logged = float(re.search(r"step 0: hellaswag acc_norm ([0-9.]+)", open(sys.argv[2]).read()).group(1))
assert abs(before - logged) < 1e-4 and start[0]["hellaswag"]["examples"] == 100, (start, logged)
assert 5.0 < start[0]["val_loss"] < 6.0, start
hs = last["hellaswag"]
print(f"hellaswag acc_norm {before:.2f} before training, {hs['acc_norm']:.2f} (acc {hs['acc']:.2f}) after")
assert hs["examples"] == 100, hs
assert before < 0.5, "an untrained model should be near chance (0.25)"
assert hs["acc_norm"] > 0.8 and hs["acc"] > 0.8, "the trained model should tell its language from shuffled letters"
assert [r["step"] for r in steps if "hellaswag" in r] == [100, 200]
assert recs[-1]["final_hellaswag_acc_norm"] == hs["acc_norm"]
PY
