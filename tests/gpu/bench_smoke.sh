#!/usr/bin/env bash
# The GPU benchmark, end to end, without a GPU (ctest emulated.bench_gpu):
# bench/gpu_vs_torch.sh with bench_gpu_train, bench_gpu_attention and
# bench_gpu_gemm built against the emulated backend, at a tiny shape and a
# few iterations. The PyTorch scripts need a GPU, so here their rows fail
# and are left out, as the script allows; they are parsed, so a syntax error
# in them fails this test. Where some python3 here has PyTorch, the scripts
# run through torch_cpu_shim.py, which is enough for torch_gpu_gemm.py: its
# rows must then be joined to ours. Then the results JSON must hold what a GPU run's
# would: our row with its four phases, every GEMM of the step (the GELU ones
# both fused and through the kernel, each on the path it asked for), and the
# three attention kernels, and sampling's two ways, all with positive times. The timings themselves
# mean nothing here.
# Both rows' activation bytes must equal what `plan` predicts for the shape
# (lib/strategies/cost_model.cpp), byte for byte.
# With TRAINER (the emulated gpt_train) and PREPARE_DATA, the trainer's own
# row too: gpt_train on 1 rank at the same shape, its steps after the
# warm-up timed from its metrics.
#   bench_smoke.sh SOURCE_DIR EMULATED_BENCH_DIR PLAN [TRAINER PREPARE_DATA]  (the programs are in EMULATED_BENCH_DIR/bench/)
set -euo pipefail
src="$1"; build="$2"; plan="$3"; trainer="${4:-}"; prepare="${5:-}"
out="$build/results"
rm -rf "$out"
mkdir -p "$out"
for f in "$src"/bench/torch_gpu_*.py; do
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f"
done
py=python3
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import torch' 2> /dev/null; then
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$candidate" "$src/tests/gpu/torch_cpu_shim.py" > "$out/torch-on-cpu"
    chmod +x "$out/torch-on-cpu"
    py="$out/torch-on-cpu"
    break
  fi
done
echo "PyTorch scripts run with: $py"
# The host cuBLASLt offers 3 algorithms per product (all computing the same), so the autotuned rows tune:
# bench_gpu_train --gemm-autotune (ours-autotune) and, through its flag, gpt_train (its debug log says so).
GPT_HOST_CUBLASLT_ALGORITHMS=3 TRAINER="$trainer" PREPARE_DATA="$prepare" \
  TRAINER_FLAGS="--threads 1 --gemm-autotune 3 --log-level debug" RESULTS_DIR="$out" STEPS=2 WARMUP=1 ITERS=2 PYTHON="$py" "$src/bench/gpu_vs_torch.sh" "$build" tiny 2 64 > "$out/log.txt" 2>&1 ||
  { echo "FAILED: gpu_vs_torch.sh"; cat "$out/log.txt"; exit 1; }
cat "$out/log.txt"
for mode in none gelu-ln; do
  "$plan" --model tiny --ranks 1 --device cuda --gpu H100 --precision bf16 --micro-batch 2 --seq-len 64 \
    --attention ours --recompute "$mode" --json "$out/plan-$mode.json" > /dev/null
done
# --attention-wide-forward reaches the kernel: the emulator's launch log (host_cuda/launch_log.hpp) of a step
# with it names the 128-query forward kernel, and of one without it does not.
for wide in "" --attention-wide-forward; do
  log="$out/launches${wide:+-wide}"; rm -rf "$log"; mkdir -p "$log"
  GPT_EMULATED_LAUNCH_LOG="$log" "$build/bench/bench_gpu_train" --model tiny --batch 2 --seq 64 --steps 1 --warmup 0 \
    $wide > "$log/out.txt" 2>&1 || { echo "FAILED: bench_gpu_train $wide"; cat "$log/out.txt"; exit 1; }
  n=$(cat "$log"/launches.*.txt | grep -c forward_wide_kernel || true)
  if [[ -n "$wide" && "$n" == 0 ]] || [[ -z "$wide" && "$n" != 0 ]]; then
    echo "FAILED: bench_gpu_train ${wide:-without --attention-wide-forward}: $n launch lines of forward_wide_kernel"
    cat "$log"/launches.*.txt; exit 1
  fi
done
echo "forward_wide_kernel launched with --attention-wide-forward only"
python3 - "$out" "$py" "$trainer" <<'PY'
import glob, json, sys
files = glob.glob(f"{sys.argv[1]}/gpu-*.json")
assert len(files) == 1, f"expected one results file, got {files}"
r = json.load(open(files[0]))
for key in ("device", "date", "git_revision", "config", "rows", "attention", "gemm"):
    assert key in r, f"results lack {key!r}"
ours = r["rows"][0]
assert ours["impl"] == "ours" and ours["model"] == "tiny" and ours["tokens_per_s"] > 0, ours
# The --recompute gelu-ln row: 6 N*C bf16 elements per block fewer, less one N*C and 4 N*C shared (N = 2 * 64, C = 128, L = 4).
re = [x for x in r["rows"] if x["impl"] == "ours-recompute-gelu-ln"]
assert len(re) == 1 and re[0]["tokens_per_s"] > 0, r["rows"]
saved = ours["mem_activations_bytes"] - re[0]["mem_activations_bytes"]
assert saved == 2 * (4 * 6 - 5) * 128 * 128, (saved, ours["mem_activations_bytes"], re[0]["mem_activations_bytes"])
for row, mode in ((ours, "none"), (re[0], "gelu-ln")):
    predicted = json.load(open(f"{sys.argv[1]}/plan-{mode}.json"))["rows"][0]["mem"]["activations"]
    assert row["mem_activations_bytes"] == predicted, (mode, row["mem_activations_bytes"], predicted)
print("activation bytes as plan predicts:", ours["mem_activations_bytes"], re[0]["mem_activations_bytes"])
tr = [x for x in r["rows"] if x["impl"] == "ours-gpt_train"]
ta = [x for x in r["rows"] if x["impl"] == "ours-gpt_train-attention-auto"]
if sys.argv[3]:  # the trainer's row: its 2 steps after the warm-up, its GEMMs tuned (--gemm-autotune 3)
    # The results name the commit the measured build came from: the trainer's own --version.
    import subprocess
    built = subprocess.run([sys.argv[3], "--version"], capture_output=True, text=True).stdout.split()[1]
    assert r["git_revision"] == built, (r["git_revision"], built)
    assert len(tr) == 1 and tr[0]["tokens_per_s"] > 0 and tr[0]["steps"] == 2 and tr[0]["mem_peak_bytes"] > 0, tr
    assert tr[0]["attention"] == "ours" and "attention_auto" not in tr[0], tr
    tuned = [l for l in open(f"{sys.argv[1]}/log.txt") if "GEMM autotune" in l and "3 of 3 algorithms ran" in l]
    assert tuned, "gpt_train --gemm-autotune 3 tuned no GEMM"
    # --attention auto: the emulator has no cuDNN, so ours runs, and the row and the table say why.
    assert len(ta) == 1 and ta[0]["steps"] == 2 and ta[0]["attention"] == "ours", ta
    assert ta[0]["attention_auto"].startswith("attention auto: ours (cuDNN's attention cannot run: "), ta
    table = open(f"{sys.argv[1]}/log.txt").read()
    assert f"# ours-gpt_train-attention-auto: {ta[0]['attention_auto']}" in table, "no attention auto line"
else:
    assert not tr and not ta, (tr, ta)
# The autotuned row: every plan timed its 3 algorithms, and the step computes what the untuned one does (the
# host algorithms agree; a trial that added into an accumulated gradient would change the loss).
at = [x for x in r["rows"] if x["impl"] == "ours-autotune"]
assert len(at) == 1 and at[0]["gemm_autotune"] == 8 and at[0]["gemm_tune"], at
assert all(t["candidates"] == 3 and t["timed"] == 3 and 0 <= t["picked"] < 3 for t in at[0]["gemm_tune"]), at
assert at[0]["final_loss"] == ours["final_loss"], (at[0]["final_loss"], ours["final_loss"])
# The row storing the score gradients (--attention-ds-mib 256; ours, the default, recomputes dQ): 2 x 4 (b, h)
# pairs of one 64 x 64 bf16 tile more in its activations, and the same training up to rounding (dS rounded to
# bf16 from S^T = K Q^T or from S = Q K^T).
sd = [x for x in r["rows"] if x["impl"] == "ours-stored-ds"]
assert len(sd) == 1 and sd[0]["attention_ds_mib"] == 256 and ours["attention_ds_mib"] == 0, sd
assert sd[0]["mem_activations_bytes"] - ours["mem_activations_bytes"] == 2 * 4 * 64 * 64 * 2, (ours, sd)
assert abs(sd[0]["final_loss"] - ours["final_loss"]) < 1e-2 * ours["final_loss"], (sd[0]["final_loss"], ours["final_loss"])
# The two candidates for the defaults. dS budgeted at 3/4 of the emulator's 50 MiB L2 (37.5 MiB): at this shape
# the 8 pairs fit in one launch either way, so the row computes what the stored-dS row does, bit for bit.
l2 = [x for x in r["rows"] if x["impl"] == "ours-ds-in-l2"]
assert len(l2) == 1 and l2[0]["attention_ds_mib"] == 37 and l2[0]["attention_ds_bytes"] == sd[0]["attention_ds_bytes"] \
    == 2 * 4 * 64 * 64 * 2 and not l2[0]["attention_wide_forward"], (l2, sd)
assert l2[0]["final_loss"] == sd[0]["final_loss"], (l2[0]["final_loss"], sd[0]["final_loss"])
# The forward on 128-query tiles: the same training up to rounding.
wf = [x for x in r["rows"] if x["impl"] == "ours-wide-fwd"]
assert len(wf) == 1 and wf[0]["attention_wide_forward"] and not ours["attention_wide_forward"], wf
assert abs(wf[0]["final_loss"] - ours["final_loss"]) < 1e-3 * ours["final_loss"], \
    (wf[0]["final_loss"], ours["final_loss"])
# The bias gradients from the dW products' epilogue (BGRADB; the host cuBLASLt's sums in double, rounded to
# bf16 once more): the same training up to rounding.
bg = [x for x in r["rows"] if x["impl"] == "ours-bgradb"]
assert len(bg) == 1 and bg[0]["bias_grad_epilogue"] and not ours["bias_grad_epilogue"], bg
assert abs(bg[0]["final_loss"] - ours["final_loss"]) < 1e-3 * ours["final_loss"], \
    (bg[0]["final_loss"], ours["final_loss"])
print("final losses: ours", ours["final_loss"], "dS in L2", l2[0]["final_loss"], "wide forward", wf[0]["final_loss"],
      "bias-gradient epilogue", bg[0]["final_loss"])
assert "gemm_tune" not in ours, ours
phases = ours["phases"]
assert [p["phase"] for p in phases] == ["forward", "head", "backward", "optimizer"], phases
assert all(p["ms"] > 0 for p in phases), phases
# The phases lie inside the timed steps (the step adds the loss read-back).
assert sum(p["ms"] for p in phases) <= ours["step_ms"] * 1.001, (phases, ours["step_ms"])
# Their model FLOPs add up to the step's, and that is PaLM's count for tiny
# (L=4, C=128, V=256) at T=64: 6 * (12 L C^2 + V C) + 12 L C T per token.
L, C, V, T, tokens = 4, 128, 256, 64, 2 * 64
assert ours["flops_per_token"] == 6 * (12 * L * C * C + V * C) + 12 * L * C * T, ours["flops_per_token"]
assert abs(sum(p["flops"] for p in phases) / (ours["flops_per_token"] * tokens) - 1) < 1e-12, phases
assert phases[3]["flops"] == 0 and phases[2]["flops"] == 2 * phases[0]["flops"], phases
gemm = r["gemm"]["results"]
names = [(g["op"], g["pass"], g["epilogue"]) for g in gemm]
assert len(gemm) == 17, names  # 5 products x 3 passes + the GELU ones once more through the kernel
for op in ("qkv", "attproj", "fc", "fcproj", "lm_head"):
    for ps in ("fwd", "dinp", "dW"):
        assert any(g["op"] == op and g["pass"] == ps for g in gemm), (op, ps)
for g in gemm:
    assert g["ms"] > 0 and g["tflops"] > 0, g
    assert 2 * g["m"] * g["n"] * g["k"] == 2 * g["N"] * g["C"] * g["OC"], g
    if g["fused"] is not None:  # the emulated cuBLASLt has every fused algorithm
        assert g["fused"] == g["epilogue"].endswith("(fused)"), g
assert [g["epilogue"] for g in gemm if g["fused"] is not None] == \
    ["bias+GELU (fused)", "bias+GELU (kernel)", "GELU' (fused)", "GELU' (kernel)"], names
if sys.argv[2].endswith("torch-on-cpu"):  # PyTorch's GEMM rows, one per (op, pass), on the CPU
    theirs = r["gemm_torch"]["results"]
    assert [(t["op"], t["pass"]) for t in theirs] == \
        list(dict.fromkeys((g["op"], g["pass"]) for g in gemm)), theirs
    assert all(t["ms"] > 0 for t in theirs), theirs
else:
    assert r["gemm_torch"] is None, r["gemm_torch"]
bias = r["gemm"]["bias_grad"]  # 4 layers with a bias, at 16-byte vectors and one element per lane
vec = 8 if r["config"]["precision"] == "bf16" else 4
assert [(b["op"], b["elements_per_lane"]) for b in bias] == \
    [(op, e) for op in ("qkv", "attproj", "fc", "fcproj") for e in (vec, 1)], bias
assert all(b["ms"] > 0 and b["gbps"] > 0 for b in bias), bias
if sys.argv[2].endswith("torch-on-cpu"):
    assert [t["op"] for t in r["gemm_torch"]["bias_grad"]] == ["qkv", "attproj", "fc", "fcproj"], r["gemm_torch"]
check = r["gemm"]["gelu_epilogue"]  # the emulated cuBLASLt computes GPT-2's GELU
assert check["result"] == "matches" and check["closest"] == "tanh" and check["pre_activation_exact"], check
assert check["forward_error"] < 1e-2 and check["backward_error"] < 1e-2, check
att = r["attention"]["results"]
assert [a["kernel"] for a in att] == ["tensor_core_bf16", "tensor_core_bf16_ds_in_l2", "tensor_core_bf16_recompute",
                                     "tensor_core_bf16_wide_fwd", "simt_bf16", "simt_fp32"], att
assert all(a["fwd_ms"] > 0 and a["bwd_ms"] > 0 for a in att), att
assert [a["ds_mib"] > 0 for a in att] == [True, True, False, True, False, False], att  # dQ from stored dS or recomputed
# At head size 128 (tiny's width in one head) every row but the wide forward's (which takes 32 and 64), and
# the backward single-buffered (compiled at 128 only).
a128 = r["attention_hs128"]
assert a128["head_size"] == 128 and a128["heads"] == 1 and r["attention"]["head_size"] == 32, (a128, r["attention"])
assert [a["kernel"] for a in a128["results"]] == ["tensor_core_bf16", "tensor_core_bf16_ds_in_l2",
                                                  "tensor_core_bf16_recompute", "tensor_core_bf16_single",
                                                  "simt_bf16", "simt_fp32"], a128
assert all(a["fwd_ms"] > 0 and a["bwd_ms"] > 0 for a in a128["results"]), a128
assert r["attention_hs96"] is None, r["attention_hs96"]  # 96 does not divide tiny's width: left out
# cuDNN's attention has no emulated stand-in: its benchmark row is left out, saying why, and so is the step's.
assert "emulated backend" in r["attention"]["cudnn_unavailable"], r["attention"]
assert not [x for x in r["rows"] if x["impl"] == "ours-cudnn-attention"], r["rows"]
smp = r["sampling"]  # prompt 32 + 32 greedy tokens of tiny at T=64, cached and by whole passes
assert smp["prompt_tokens"] == 32 and smp["new_tokens"] == 32 and smp["whole_s"] > 0 and smp["cached_s"] > 0, smp
assert smp["same_tokens"] >= 1 and smp["cache_bytes"] == 4 * 64 * 2 * 128 * 2, smp
# The second token's logits (the first through the decode kernel) against the whole pass's: rounding apart, and
# the whole pass's top-2 gap beside them.
assert 0 <= smp["decode_logits_max_diff"] < 0.1 and smp["decode_top2_gap"] >= 0, smp
print(f"OK: {files[0]}: {len(phases)} phases, {len(gemm)} GEMMs, {len(att)} attention kernels")
PY
