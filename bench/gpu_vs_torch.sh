#!/usr/bin/env bash
# Single-GPU training throughput, side by side in one run on one device:
# this project's CUDA backend (bench_gpu_train, bf16) vs PyTorch (bf16
# autocast + SDPA flash attention + fused AdamW), eager and torch.compile.
# Same model, batch, sequence length, optimizer and clipping. MFU for every
# row uses our FLOP count (model/flops.hpp) and the device's peak, so the
# ratios equal the tokens/s ratios. Also times our attention kernels side by
# side (bench_gpu_attention: tensor cores vs CUDA cores) and PyTorch's fused
# attention at the same shape (torch_gpu_attention.py: FlashAttention-2,
# cuDNN), all of them again at head size 128 (the model's width in heads of
# 128), and every GEMM of the step at its shape (bench_gpu_gemm: cuBLASLt
# with our epilogues, fused and unfused GELU) against PyTorch's plain GEMM
# (torch_gpu_gemm.py), and our step again with --recompute gelu-ln (its
# time and memory against keeping every activation), and sampling through the
# key/value cache against whole passes (bench_gpu_sample), and, with
# TRAINER=path/to/gpt_train (PREPARE_DATA: its prepare_data, by default
# beside it), the trainer program itself at the same shape on 1 rank. Our step is also split into phases (forward, head,
# backward, optimizer) with each one's model TFLOP/s. Prints tables and writes
# $RESULTS_DIR/gpu-<device>-<date>.json (default bench/results/; device, date,
# git revision, config, numbers). STEPS, WARMUP and ITERS shorten the runs
# (tests/gpu/bench_smoke.sh runs all of it on the emulated backend).
#   bench/gpu_vs_torch.sh [BUILD_DIR] [MODEL] [BATCH] [SEQ]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-${BUILD_DIR:-$root/build}}"; model="${2:-gpt2-124m}"; batch="${3:-16}"; seq="${4:-1024}"
py="${PYTHON:-python3}"  # runs the PyTorch scripts
results="${RESULTS_DIR:-$root/bench/results}"
steps="${STEPS:-20}"; warmup="${WARMUP:-5}"; iters="${ITERS:-20}"
read -r -a TRAINER_FLAGS <<< "${TRAINER_FLAGS:-}"  # more gpt_train flags for its row (e.g. --threads 1 on the emulator)
shape=(--model "$model" --batch "$batch" --seq "$seq")
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
# Runs a benchmark: all its output to stderr (the log), its JSON line to stdout.
json_of() { local o rc=0; o="$("$@")" || rc=$?; printf '%s\n' "$o" >&2; [ "$rc" = 0 ] && printf '%s\n' "$o" | grep '^{'; }
rows=()
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup")")
# The same with cuBLASLt's algorithms timed per GEMM shape in the first step (Matmul::set_autotune), beside
# the heuristic's picks above: whether autotuning should become the default.
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup" \
  --gemm-autotune "${GEMM_AUTOTUNE:-8}")") || echo "warning: the autotuned row failed; left out" >&2
# The attention backward reading dQ from the score gradients its dK/dV kernel stored (--attention-ds-mib 256,
# the default from 2026-11-26 to stop 51) instead of recomputing dQ's scores (the default): whether storing pays.
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup" \
  --attention-ds-mib 256)") || echo "warning: the stored-dS row failed; left out" >&2
# Two candidates for the trainer's defaults, each alone against the first row, so that one run decides both:
# the score gradients budgeted at 3/4 of the L2 (chunks whose dS the dQ launch reads from L2, not DRAM), and
# the attention forward on 128-query tiles.
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup" \
  --attention-ds-in-l2)") || echo "warning: the dS-in-L2 row failed; left out" >&2
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup" \
  --attention-wide-forward)") || echo "warning: the wide-forward row failed; left out" >&2
# The bias gradients in the dW products' cuBLASLt epilogue (BGRADB) instead of their kernel: whether the
# epilogue slows the dW products by less than the kernel's 48 launches take (1.49 ms of 32.35 on the H100).
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup" \
  --bias-grad-epilogue)") || echo "warning: the bias-gradient-epilogue row failed; left out" >&2
# cuDNN's fused attention in our step (gpt_train --attention cudnn), where cuDNN opens.
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup" \
  --attention-cudnn)") || echo "warning: the cuDNN-attention row failed (no cuDNN?); left out" >&2
for mode in eager compile; do
  if r="$("$py" "$root/bench/torch_gpu_train.py" --mode "$mode" "${shape[@]}" --steps "$steps" --warmup "$warmup" 2>/dev/null | grep '^{')"; then
    rows+=("$r")
  else
    echo "warning: PyTorch $mode run failed; row left out" >&2
  fi
done
# Our trainer itself, when TRAINER names a gpt_train (the full build's): the same shape through the whole
# program (data loader, the ddp strategy on 1 rank, metrics), byte-tokenised generated text, on 1 rank; once
# with our attention kernels (--attention ours), once as it is by default (--attention auto: cuDNN's attention
# where it runs; the header says which ran).
# trainer_row IMPL [FLAGS...]: the row's JSON on stdout.
trainer_row() {
  local impl="$1"; shift
  rm -f "$tmp/train/metrics.jsonl"
  "$root/scripts/mpirun.sh" -np 1 "$TRAINER" --model "$model" --seq-len "$seq" --micro-batch "$batch" \
    --global-batch "$batch" --steps $(( steps + warmup )) --device cuda --data "$tmp/train/data/t_train_*.bin" \
    --sample-tokens 0 --log-every 5 --metrics "$tmp/train/metrics.jsonl" "${TRAINER_FLAGS[@]}" "$@" >&2 &&
    python3 - "$tmp/train/metrics.jsonl" "$warmup" "$batch" "$seq" "$impl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
run = recs[0]
steps = [r for r in recs if r.get("step") and "step_time_s" in r and r["step"] > int(sys.argv[2])]
ms = 1e3 * sum(r["step_time_s"] for r in steps) / len(steps)
tokens = int(sys.argv[3]) * int(sys.argv[4])
row = {"impl": sys.argv[5], "device": run["device"], "tokens_per_s": tokens / (ms / 1e3), "step_ms": ms,
       "steps": len(steps), "mem_peak_bytes": max(r["mem"]["peak"] for r in steps),
       "mfu_trainer": sum(r["mfu"] for r in steps) / len(steps), "attention": run["config"]["attention"]}
if "attention_auto" in run:
    row["attention_auto"] = run["attention_auto"]
print(json.dumps(row))
PY
}
if [ -n "${TRAINER:-}" ]; then
  prepare="${PREPARE_DATA:-$(dirname "$TRAINER")/prepare_data}"
  mkdir -p "$tmp/train"
  if python3 "$root/tests/make_text.py" "$tmp/train/text.txt" 4000 &&
     "$prepare" --tokenizer byte --input "$tmp/train/text.txt" --out "$tmp/train/data" --name t --val-fraction 0 >&2
  then
    rows+=("$(trainer_row ours-gpt_train --attention ours)") || echo "warning: the gpt_train row failed; left out" >&2
    rows+=("$(trainer_row ours-gpt_train-attention-auto)") ||
      echo "warning: the gpt_train --attention auto row failed; left out" >&2
  else
    echo "warning: no data for the gpt_train rows; left out" >&2
  fi
fi
# The price of --recompute gelu-ln (llm.c's -r 2): less activation memory, a GELU and two LayerNorms more per block.
rows+=("$(json_of "$build/bench/bench_gpu_train" "${shape[@]}" --steps "$steps" --warmup "$warmup" --recompute gelu-ln)")
att="$(json_of "$build/bench/bench_gpu_attention" "${shape[@]}" --iters "$iters")" || att='null'
att_torch="$(json_of "$py" "$root/bench/torch_gpu_attention.py" "${shape[@]}" --iters "$iters")" || att_torch='null'
# The same at head sizes 128 and 96 (the model's width in heads of that size; null where they do not divide it,
# as 96 does not divide tiny's 128).
declare -A att_hs att_hs_torch
for hs in 128 96; do
  att_hs[$hs]="$(json_of "$build/bench/bench_gpu_attention" "${shape[@]}" --iters "$iters" --head-size $hs)" ||
    att_hs[$hs]='null'
  att_hs_torch[$hs]="$(json_of "$py" "$root/bench/torch_gpu_attention.py" "${shape[@]}" --iters "$iters" \
    --head-size $hs)" || att_hs_torch[$hs]='null'
done
gemm="$(json_of "$build/bench/bench_gpu_gemm" "${shape[@]}" --iters "$iters")" || gemm='null'
printf '%s\n' "$gemm" > "$tmp/gemm.json"
gemm_torch="$(json_of "$py" "$root/bench/torch_gpu_gemm.py" --shapes "$tmp/gemm.json" --iters "$iters")" || gemm_torch='null'
# Sampling: greedy tokens after a prompt of half the context, through the key/value cache and by whole passes.
sample_tokens=$(( seq / 2 < 64 ? seq / 2 : 64 ))
sample="$(json_of "$build/bench/bench_gpu_sample" --model "$model" --seq "$seq" --prompt $(( seq / 2 )) \
  --tokens "$sample_tokens")" || sample='null'
# The commit the measured build was built from: TRAINER's --version, built beside the benchmarks (it took
# GPT_GIT_REVISION, or the tree's git and -dirty, at build time). Without it: GPT_GIT_REVISION, where this copy's
# .git cannot say (the device tool's may be stale), else the tree's git now.
built=""
if [ -n "${TRAINER:-}" ]; then
  built=$("$TRAINER" --version 2>/dev/null | head -1 | awk '{print $2}') || built=""
fi
if [[ -n "$built" && "$built" != unknown ]]; then
  rev="$built"; dirty=""
elif [ -n "${GPT_GIT_REVISION:-}" ]; then
  rev="$GPT_GIT_REVISION"; dirty=""
else
  rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  dirty="$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo "+local changes" || true)"
fi
# The rows travel in the environment: the program itself comes on stdin.
ROWS_JSON="$(printf '%s\n' "${rows[@]}")" ATTENTION_JSON="$att" ATTENTION_TORCH_JSON="$att_torch" \
  ATTENTION_HS_JSON="{\"128\": ${att_hs[128]}, \"96\": ${att_hs[96]}}" \
  ATTENTION_HS_TORCH_JSON="{\"128\": ${att_hs_torch[128]}, \"96\": ${att_hs_torch[96]}}" \
  GEMM_JSON="$gemm" GEMM_TORCH_JSON="$gemm_torch" SAMPLE_JSON="$sample" python3 - "$results" "$rev$dirty" <<'PY'
import datetime, json, os, re, sys
rows = [json.loads(l) for l in os.environ["ROWS_JSON"].splitlines() if l.strip()]
ours = rows[0]
# MFU per token/s on this device (our FLOPs per token / the device's peak).
peak_ratio = ours["mfu"] / ours["tokens_per_s"] if ours["tokens_per_s"] else 0
print(f"# {ours['model']} B={ours['batch']} T={ours['seq']} on {ours['device']}")
print(f"# {'impl':<30} {'tok/s':>10} {'ms/step':>9} {'MFU':>7} {'vs ours':>8} {'peak mem':>10}")
for r in rows:
    r["mfu"] = r["tokens_per_s"] * peak_ratio
    rel = r["tokens_per_s"] / ours["tokens_per_s"]
    print(f"  {r['impl']:<30} {r['tokens_per_s']:>10.0f} {r['step_ms']:>9.2f} {100*r['mfu']:>6.1f}% {rel:>7.2f}x "
          f"{r['mem_peak_bytes']/2**30:>8.2f} GiB")
for r in rows:  # which SDPA backend PyTorch ran (torch_gpu_train.py profiles one step)
    if r.get("attention_kernels"):
        print(f"# {r['impl']} attention kernels: {', '.join(r['attention_kernels'])}")
    if r.get("attention_auto"):  # which attention gpt_train --attention auto ran, and why
        print(f"# {r['impl']}: {r['attention_auto']}")
tuned = next((r for r in rows if r.get("gemm_tune")), None)
if tuned:  # per GEMM shape: the heuristic's first pick against the fastest of the algorithms timed
    epi = {0: "none", 1: "bias", 2: "GELU aux", 3: "DGELU"}
    print(f"# GEMM autotune ({tuned['impl']}, up to {tuned['gemm_autotune']} algorithms per shape)")
    print(f"  {'m':>7} {'n':>6} {'k':>6} {'epilogue':<9} {'timed':>5} {'pick':>4} {'first ms':>9} {'best ms':>8} {'speed-up':>8}")
    for t in tuned["gemm_tune"]:
        up = f"{t['first_ms'] / t['best_ms']:.2f}x" if t["best_ms"] > 0 and t["first_ms"] > 0 else "-"
        print(f"  {t['m']:>7} {t['n']:>6} {t['k']:>6} {epi.get(t['epilogue'], '?'):<9} {t['timed']:>5} {t['picked']:>4} "
              f"{t['first_ms']:>9.4f} {t['best_ms']:>8.4f} {up:>8}")
print(f"# our step by phase ({ours['step_ms']:.2f} ms/step)")
print(f"  {'phase':<10} {'ms':>9} {'share':>7} {'TFLOP/s':>9}")
for p in ours.get("phases", []):
    print(f"  {p['phase']:<10} {p['ms']:>9.3f} {100*p['share']:>6.1f}% {p['tflops']:>9.1f}")
gemm = json.loads(os.environ.get("GEMM_JSON") or "null")
gemm_torch = json.loads(os.environ.get("GEMM_TORCH_JSON") or "null")
if gemm:
    theirs = {(r["op"], r["pass"]): r for r in (gemm_torch or {}).get("results", [])}
    print("# GEMMs: ours (cuBLASLt, our epilogues) vs PyTorch's plain GEMM at the same shape")
    print(f"  {'op':<8} {'pass':<5} {'epilogue':<18} {'m':>7} {'n':>6} {'k':>6} {'ours TF/s':>10} {'torch TF/s':>11} {'speed-up':>8}")
    for r in gemm["results"]:
        t = theirs.get((r["op"], r["pass"]))
        ratio = f"{t['ms'] / r['ms']:.2f}x" if t and r["ms"] > 0 else "-"
        tt = f"{t['tflops']:.1f}" if t else "-"
        print(f"  {r['op']:<8} {r['pass']:<5} {r['epilogue']:<18} {r['m']:>7} {r['n']:>6} {r['k']:>6} "
              f"{r['tflops']:>10.1f} {tt:>11} {ratio:>8}")
    theirs = {r["op"]: r for r in (gemm_torch or {}).get("bias_grad", [])}
    print("# bias gradients: ours (16-byte vectors / one element per lane) vs PyTorch's dout.sum(0), GB/s of dout read")
    print(f"  {'op':<8} {'N':>7} {'OC':>6} {'vectors':>8} {'elements':>9} {'torch':>8} {'speed-up':>8}")
    for op in dict.fromkeys(b["op"] for b in gemm.get("bias_grad", [])):
        vec, one = (next(b for b in gemm["bias_grad"] if b["op"] == op and k(b)) for k in
                    (lambda b: b["elements_per_lane"] > 1, lambda b: b["elements_per_lane"] == 1))
        t = theirs.get(op)
        ratio = f"{t['ms'] / vec['ms']:.2f}x" if t and vec["ms"] > 0 else "-"
        tg = f"{t['gbps']:.0f}" if t else "-"
        print(f"  {op:<8} {vec['N']:>7} {vec['OC']:>6} {vec['gbps']:>8.0f} {one['gbps']:>9.0f} {tg:>8} {ratio:>8}")
att_hs = json.loads(os.environ["ATTENTION_HS_JSON"])
att_hs_torch = json.loads(os.environ["ATTENTION_HS_TORCH_JSON"])
for hs, a in att_hs.items():
    if not a:
        continue
    n = a["heads"]
    print(f"# attention at head size {hs} ({n} head{'s' if n != 1 else ''} of {a['model']}'s width), ms")
    print(f"  {'kernel':<26} {'fwd ms':>9} {'bwd ms':>9}")
    for r in a["results"] + (att_hs_torch[hs] or {}).get("rows", []):
        print(f"  {r['kernel']:<26} {r['fwd_ms']:>9.3f} {r['bwd_ms']:>9.3f}")
sample = json.loads(os.environ.get("SAMPLE_JSON") or "null")
if sample:
    print(f"# sampling: {sample['new_tokens']} greedy tokens after a prompt of {sample['prompt_tokens']}")
    print(f"  {'whole passes tok/s':>20} {'cached tok/s':>13} {'speed-up':>9} {'same tokens':>12} "
          f"{'logit diff':>11} {'top-2 gap':>10}")
    fmt = lambda v: "-" if v is None else f"{v:.2e}"  # the second token's logits: the paths' difference, its gap
    print(f"  {sample['whole_tokens_per_s']:>20.1f} {sample['cached_tokens_per_s']:>13.1f} "
          f"{sample['speedup']:>8.1f}x {sample['same_tokens']:>6}/{sample['new_tokens']} "
          f"{fmt(sample.get('decode_logits_max_diff')):>11} {fmt(sample.get('decode_top2_gap')):>10}")
date = datetime.date.today().isoformat()
out = {"device": ours["device"], "date": date, "git_revision": sys.argv[2],
       "config": {k: ours[k] for k in ("model", "batch", "seq", "precision", "steps")}, "rows": rows,
       "attention": json.loads(os.environ.get("ATTENTION_JSON") or "null"),
       "attention_torch": json.loads(os.environ.get("ATTENTION_TORCH_JSON") or "null"),
       **{f"attention_hs{hs}": a for hs, a in att_hs.items()},
       **{f"attention_hs{hs}_torch": a for hs, a in att_hs_torch.items()},
       "gemm": gemm, "gemm_torch": gemm_torch, "sampling": sample}
name = re.sub(r"[^A-Za-z0-9]+", "-", ours["device"]).strip("-").lower()
path = f"{sys.argv[1]}/gpu-{name}-{date}.json"
os.makedirs(sys.argv[1], exist_ok=True)
json.dump(out, open(path, "w"), indent=1)
print(json.dumps({r["impl"]: round(r["tokens_per_s"]) for r in rows}))
print(f"wrote {path}")
PY
