#!/usr/bin/env bash
# Single-GPU training throughput, side by side in one run on one device:
# this project's CUDA backend (bench_gpu_train, bf16) vs PyTorch (bf16
# autocast + SDPA flash attention + fused AdamW), eager and torch.compile.
# Same model, batch, sequence length, optimizer and clipping. MFU for every
# row uses our FLOP count (model/flops.hpp) and the device's peak, so the
# ratios equal the tokens/s ratios. Also times our attention kernels side by
# side (bench_gpu_attention: tensor cores vs CUDA cores) and PyTorch's fused
# attention at the same shape (torch_gpu_attention.py: FlashAttention-2,
# cuDNN). Prints tables and writes
# bench/results/gpu-<device>-<date>.json (device, date, git revision, config, numbers).
#   bench/gpu_vs_torch.sh [BUILD_DIR] [MODEL] [BATCH] [SEQ]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-${BUILD_DIR:-$root/build}}"; model="${2:-gpt2-124m}"; batch="${3:-16}"; seq="${4:-1024}"
py="${PYTHON:-python3}"
rows=()
rows+=("$("$build/bench/bench_gpu_train" --model "$model" --batch "$batch" --seq "$seq" | grep '^{')")
for mode in eager compile; do
  if r="$("$py" "$root/bench/torch_gpu_train.py" --mode "$mode" --model "$model" --batch "$batch" --seq "$seq" 2>/dev/null | grep '^{')"; then
    rows+=("$r")
  else
    echo "warning: PyTorch $mode run failed; row left out" >&2
  fi
done
att="$("$build/bench/bench_gpu_attention" --model "$model" --batch "$batch" --seq "$seq" | tee /dev/stderr | grep '^{')" || att='null'
att_torch="$("$py" "$root/bench/torch_gpu_attention.py" --model "$model" --batch "$batch" --seq "$seq" | tee /dev/stderr | grep '^{')" || att_torch='null'
rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo "+local changes" || true)"
# The rows travel in the environment: the program itself comes on stdin.
ROWS_JSON="$(printf '%s\n' "${rows[@]}")" ATTENTION_JSON="$att" ATTENTION_TORCH_JSON="$att_torch" \
  "$py" - "$root/bench/results" "$rev$dirty" <<'PY'
import datetime, json, os, re, sys
rows = [json.loads(l) for l in os.environ["ROWS_JSON"].splitlines() if l.strip()]
ours = rows[0]
# MFU per token/s on this device (our FLOPs per token / the device's peak).
peak_ratio = ours["mfu"] / ours["tokens_per_s"] if ours["tokens_per_s"] else 0
print(f"# {ours['model']} B={ours['batch']} T={ours['seq']} on {ours['device']}")
print(f"# {'impl':<16} {'tok/s':>10} {'ms/step':>9} {'MFU':>7} {'vs ours':>8} {'peak mem':>10}")
for r in rows:
    r["mfu"] = r["tokens_per_s"] * peak_ratio
    rel = r["tokens_per_s"] / ours["tokens_per_s"]
    print(f"  {r['impl']:<16} {r['tokens_per_s']:>10.0f} {r['step_ms']:>9.2f} {100*r['mfu']:>6.1f}% {rel:>7.2f}x {r['mem_peak_bytes']/2**30:>8.2f} GiB")
date = datetime.date.today().isoformat()
out = {"device": ours["device"], "date": date, "git_revision": sys.argv[2],
       "config": {k: ours[k] for k in ("model", "batch", "seq", "precision", "steps")}, "rows": rows,
       "attention": json.loads(os.environ.get("ATTENTION_JSON") or "null"),
       "attention_torch": json.loads(os.environ.get("ATTENTION_TORCH_JSON") or "null")}
name = re.sub(r"[^A-Za-z0-9]+", "-", ours["device"]).strip("-").lower()
path = f"{sys.argv[1]}/gpu-{name}-{date}.json"
os.makedirs(sys.argv[1], exist_ok=True)
json.dump(out, open(path, "w"), indent=1)
print(json.dumps({r["impl"]: round(r["tokens_per_s"]) for r in rows}))
print(f"wrote {path}")
PY
