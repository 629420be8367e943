#!/usr/bin/env bash
# Every strategy on the GPU through the common trainer (ctest label gpu):
#  * fp32: 1 rank on the GPU follows 1 rank on the CPU (losses and gradient
#    norms within 1e-4 relative), and every strategy on 2 and 4 ranks
#    sharing the GPU (MPI, staged through host memory) equals 1 rank on the
#    GPU (within 1e-5: only the summation order of the reductions differs);
#  * head sizes 128 and 96 (one head): fp32 within 1e-4 of the CPU,
#    bf16 within 3% (on the emulator at 128 also as an L40S, whose 99 KiB a
#    block take the backward single-buffered: the same bits; and as a GPU
#    whose blocks cannot have the tensor-core kernels' shared memory, on 1
#    rank and on 1 of 2: the CUDA-core ones, with a warning);
#    head size 40 ends both ranks with one line naming the sizes taken; (the
#    emulator) a GPU of compute capability 7.5, or one the build has no code
#    for, ends both ranks with one line;
#  * bf16 (the default on cuda, with the default --attention auto: cuDNN's
#    attention where it runs, else ours): 1 rank within 3% of the fp32 GPU losses
#    (tolerance: tests/gpu/test_cuda_model.cpp); every strategy on 2 ranks,
#    with fp32 and bf16 gradient reduction, within 2% of 1 bf16 rank
#    (losses and gradient norms; measured up to 0.7%: the reductions' order
#    and bf16 rounding; a gradient piece dropped moves the norm by 2x);
#  * NCCL: 1 rank runs every strategy (NCCL allows one rank per GPU; with
#    the emulator, which can have several devices, 2 ranks too);
#  * a bf16 zero3 checkpoint of device state resumes exactly under zero3 and
#    within 2% under ddp on 1 rank; ddp's on 2 ranks with --ckpt-async
#    (each rank's share downloaded: the snapshot) is the synchronous one's,
#    bit for bit, and resumes exactly; evaluated alone (--steps 0: the bf16
#    parameters only) under ddp and zero3, its validation loss is the
#    training run's, to the bit (with --attention auto: cuDNN's forward
#    plan alone, within 2%; the emulator: ours, to the bit); in fp32 over all 93 sequences of a small
#    set (--val-batches 0: a partial last batch) under zero3 on 2 ranks, the
#    loss 1 rank gives reading them one at a time (1e-6);
#  * samples through the device's key/value cache equal the CPU's
#    (the emulator; a real GPU may break a near tie) and zero3's on 2 ranks;
#  * HellaSwag (--hellaswag; 32 examples made from random letters, so the
#    scores are arbitrary and any error moves them; rows cut to seq_len):
#    the fp32 GPU's accuracies equal the CPU's on 1 rank and zero3's on 2
#    (the emulator exactly; a real GPU within 2 examples: near ties may
#    fall either way), bf16's within 8.
# Exits 77 (skipped) on a machine without a GPU.
#   train_strategies.sh BUILD_DIR WORK_DIR [EMULATED_TRAINER]
# With EMULATED_TRAINER (tests/gpt_train_emulated: the trainer on the CUDA
# backend compiled for the CPU emulator, NCCL's calls done by MPI on host
# memory) the same runs check the device code paths without a GPU, NCCL
# also runs on 2 ranks (GPT_EMULATED_DEVICES=2), and MFU must be 0 (no peak
# is known for the emulated device), not inf or null. Streams run in the
# emulator's adversarial orders (tests/unit/host_cuda/host_streams.cpp):
# every stream as late as the host allows, and for NCCL on 2 ranks also
# the collectives as early as their event waits allow, so a missing event
# wait or synchronisation changes the numbers.
set -euo pipefail
build="$1"; work="$2"; emulated="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
mpirun="$root/scripts/mpirun.sh"
rm -rf "$work"
"$here/../make_tiny_run.sh" "$build" "$work"
trainer="${emulated:-$build/apps/gpt_train}"
train=("$trainer" --config "$work/tiny.toml" --n-head 2 --steps 8)  # head size 32

if [ -z "$emulated" ] && ! out="$("$mpirun" -np 1 "${train[@]}" --device cuda --metrics "$work/probe.jsonl" 2>&1)"; then
  if grep -q "no CUDA device" <<<"$out"; then echo "skipped: no CUDA device on this machine"; exit 77; fi
  echo "$out"; exit 1
fi

run() {  # NAME NP ARGS...
  local name="$1" np="$2"; shift 2
  "$mpirun" -np "$np" "${train[@]}" --metrics "$work/$name.jsonl" "$@" > "$work/$name.log" 2>&1 ||
    { echo "FAILED: $name"; cat "$work/$name.log"; exit 1; }
}
compare() {  # REF RUN TOLERANCE [KEYS]: step by step, losses and gradient norms by default
  python3 - "$work/$1.jsonl" "$work/$2.jsonl" "$3" "${4:-loss grad_norm}" <<'PY'
import json, sys
def steps(p):
    return [r for r in map(json.loads, open(p)) if "type" not in r]  # step records have no type
a, b, tol, keys = steps(sys.argv[1]), steps(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split()
# A resumed run has the reference's later steps only: pair records by step.
ref = {r["step"]: r for r in a}
assert b and all(r["step"] in ref for r in b) and (len(b) == len(a) or b[0]["step"] > 1), \
    f"{sys.argv[2]}: steps {[r['step'] for r in b]}, reference {sorted(ref)}"
worst = {k: max(abs(ref[y["step"]][k] - y[k]) / abs(ref[y["step"]][k]) for y in b) for k in keys}
print(f"{sys.argv[2].split('/')[-1]:<30} max relative difference: "
      + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()) + f" (tolerance {tol:g})")
sys.exit(0 if max(worst.values()) <= tol else 1)
PY
}

run cpu 1 --device cpu
run gpu_fp32 1 --device cuda --precision fp32
compare cpu gpu_fp32 1e-4
# Head sizes 128 and 96 (one head, the model 128 or 96 wide): in
# fp32 (our CUDA-core kernels, two lanes per row) within 1e-4 of the CPU and
# in bf16 (our tensor-core kernels, or cuDNN's where auto takes it) within 3%
# of fp32, as at head size 32 above.
train32=("${train[@]}")
for shape in "128 1" "96 1"; do
  read -r width heads <<<"$shape"
  hs=$((width / heads))
  train=("$trainer" --config "$work/tiny.toml" --n-embd "$width" --n-head "$heads" --steps 8)
  run "cpu_hs$hs" 1 --device cpu
  run "gpu_fp32_hs$hs" 1 --device cuda --precision fp32
  compare "cpu_hs$hs" "gpu_fp32_hs$hs" 1e-4
  run "gpu_bf16_hs$hs" 1 --device cuda
  compare "gpu_fp32_hs$hs" "gpu_bf16_hs$hs" 0.03 loss
  # As an L40S (compute capability 8.9, 99 KiB of shared memory a block; 8.6
  # and 12.0 alike) at head size 128, our attention runs its tensor-core
  # kernels, the backward single-buffered (double buffers take 103 KiB): the
  # same run, to the bit, with no warning. As a GPU of 80 KiB a block (none
  # of compute capability 8.0+ is so; the forward takes 85 KiB) it runs the
  # CUDA-core kernels, within 3% of fp32, and the log says so.
  if [ -n "$emulated" ] && [ "$hs" = 128 ]; then
    (export GPT_EMULATED_COMPUTE_CAPABILITY=8.9 GPT_EMULATED_SMEM_OPTIN=101376
     run gpu_bf16_hs128_l40s 1 --device cuda --attention ours)
    compare gpu_bf16_hs128 gpu_bf16_hs128_l40s 0
    ! grep -q "CUDA-core" "$work/gpu_bf16_hs128_l40s.log" ||
      { echo "FAILED: head size 128 on 99 KiB a block: the CUDA-core kernels"
        cat "$work/gpu_bf16_hs128_l40s.log"; exit 1; }
    (export GPT_EMULATED_COMPUTE_CAPABILITY=8.9 GPT_EMULATED_SMEM_OPTIN=81920
     run gpu_bf16_hs128_80k 1 --device cuda --attention ours)
    compare gpu_fp32_hs128 gpu_bf16_hs128_80k 0.03 loss
    want="attention: our CUDA-core kernels (on an H100 14-22x slower than the tensor-core ones), as the tensor-core"
    want+=" ones cannot run here: at head size 128 their blocks take 85.0 KiB of shared memory, and this GPU"
    want+=" (compute capability 8.9) gives a block 80.0 KiB; cuDNN's (--attention cudnn) may"
    grep -qF "$want" "$work/gpu_bf16_hs128_80k.log" ||
      { echo "FAILED: head size 128 on 80 KiB a block: no line saying the CUDA-core kernels run"
        cat "$work/gpu_bf16_hs128_80k.log"; exit 1; }
    # Ranks may hold different GPUs: with rank 1 alone of 80 KiB a block, it
    # runs the CUDA-core kernels and rank 0 the tensor-core ones, the two
    # train as one (within 3% of fp32), and rank 0's log names rank 1.
    train_hs128=("${train[@]}")
    # The 128 run with rank 1 alone as the emulated GPU these variables describe.
    rank1_as() { train=(bash -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then export "${@:2:$1}"; fi
                                 exec "${@:$1+2}"' rank1 "$#" "$@" "${train_hs128[@]}"); }
    rank1_as GPT_EMULATED_COMPUTE_CAPABILITY=8.9 GPT_EMULATED_SMEM_OPTIN=81920
    run gpu_bf16_hs128_rank1_80k 2 --device cuda --attention ours
    train=("${train_hs128[@]}")
    compare gpu_fp32_hs128 gpu_bf16_hs128_rank1_80k 0.03 loss
    want="${want/cannot run here:/cannot run on 1 of 2 ranks (rank 1\'s GPU):}"
    grep -qF "$want" "$work/gpu_bf16_hs128_rank1_80k.log" ||
      { echo "FAILED: rank 1 alone on 80 KiB a block: no line naming it"
        cat "$work/gpu_bf16_hs128_rank1_80k.log"; exit 1; }
    # Rank 1 on a 12.0 GPU (RTX 50-series: 99 KiB a block, no code of its
    # own in a build for 80;90;100): it trains as the others (the tensor-core
    # kernels, single-buffered), and rank 0 says once that its driver
    # compiles the build's PTX for it, naming rank 1; the 1-rank runs on the
    # emulated 9.0, which the build has code for, say nothing of it.
    rank1_as GPT_EMULATED_COMPUTE_CAPABILITY=12.0 GPT_EMULATED_SMEM_OPTIN=101376
    run gpu_bf16_hs128_rank1_sm120 2 --device cuda --attention ours
    train=("${train_hs128[@]}")
    compare gpu_fp32_hs128 gpu_bf16_hs128_rank1_sm120 0.03 loss
    ! grep -q "CUDA-core" "$work/gpu_bf16_hs128_rank1_sm120.log" ||
      { echo "FAILED: a 12.0 GPU at head size 128: the CUDA-core kernels"
        cat "$work/gpu_bf16_hs128_rank1_sm120.log"; exit 1; }
    if [[ " ${GPT_BUILD_CUDA_ARCHITECTURES:-80 90 100} " =~ \ 120(-real)?\  ]]; then
      want=""  # built with sm_120 code: nothing to say
    else
      want="GPU 0 (emulated CUDA device, compute capability 12.0) has no code of its own in this build (CUDA"
      want+=" architectures ${GPT_BUILD_CUDA_ARCHITECTURES:-80 90 100}): its driver compiles the build's sm_"
    fi
    if [ -n "$want" ]; then
      grep -F "$want" "$work/gpu_bf16_hs128_rank1_sm120.log" | grep -qF "(on 1 of 2 ranks; rank 1's GPU)" ||
        { echo "FAILED: rank 1 on a 12.0 GPU: no line saying its driver compiles the PTX"
          cat "$work/gpu_bf16_hs128_rank1_sm120.log"; exit 1; }
    fi
    ! grep -q "has no code of its own" "$work/gpu_bf16_hs128.log" ||
      { echo "FAILED: an emulated 9.0 GPU: a line saying it has no code of its own"
        cat "$work/gpu_bf16_hs128.log"; exit 1; }
  fi
done
train=("${train32[@]}")
# A head size the backend does not take (40): one line naming it and the ones it takes, and 2 ranks end.
if out="$("$mpirun" -np 2 "$trainer" --config "$work/tiny.toml" --n-embd 80 --n-head 2 --steps 1 --device cuda 2>&1)"
then
  echo "FAILED: head size 40 ran on cuda"; echo "$out"; exit 1
fi
taken="32, 48, 64, 80, 96, 112, 128"
grep -q "^error: invalid model for --device cuda: head size n_embd / n_head = 40 (supported: $taken)$" <<<"$out" ||
  { echo "FAILED: head size 40 on cuda"; echo "$out"; exit 1; }
if [ -n "$emulated" ]; then
  python3 - "$work/gpu_fp32.jsonl" <<'PY'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if "type" not in r]
assert steps and all(r["mfu"] == 0 for r in steps), f"mfu on a device of unknown peak: {[r['mfu'] for r in steps]}"
PY
fi
for np in 2 4; do
  for s in ddp zero1 zero2 zero3 hybrid; do
    mesh=(); [ "$s" = hybrid ] && mesh=(--mesh 2x$((np / 2)))
    run "fp32_${s}_np$np" "$np" --device cuda --precision fp32 --strategy "$s" "${mesh[@]}"
    compare gpu_fp32 "fp32_${s}_np$np" 1e-5
  done
done
# Ranks sharing the GPU share its peak: MFU's denominator on 2 and 4 ranks is
# the one GPU's, as on 1 rank (on the emulator, whose device has no known
# peak, all are 0; the --strategy auto runs below check it with a name).
python3 - "$work" <<'PY'
import json, sys
peak = lambda name: json.loads(open(f"{sys.argv[1]}/{name}.jsonl").readline())["gemm_peak_flops"]
one = peak("gpu_fp32")
shared = {f"fp32_{s}_np{n}": peak(f"fp32_{s}_np{n}") for n in (2, 4) for s in ("ddp", "zero3")}
assert all(p == one for p in shared.values()), (one, shared)
print(f"ranks sharing the GPU: aggregate peak {one / 1e12:g} TFLOP/s, as on 1 rank")
PY
run gpu_bf16 1 --device cuda
compare gpu_fp32 gpu_bf16 0.03 loss
# --attention cudnn (cuDNN's fused attention in the blocks): on a GPU where
# cuDNN opens, zero3 on 2 ranks sharing it within 2% of the bf16 run on 1
# rank (auto's choice; ours against cuDNN: the auto case below); where it cannot run (the emulator, a GPU machine without cuDNN)
# both ranks end with one line saying why, not a hang or a crash.
if out="$("$mpirun" -np 2 "${train[@]}" --metrics "$work/cudnn_zero3.jsonl" --device cuda --strategy zero3 \
    --attention cudnn 2>&1)"; then
  [ -z "$emulated" ] || { echo "FAILED: --attention cudnn ran on the emulator"; echo "$out"; exit 1; }
  compare gpu_bf16 cudnn_zero3 0.02
else
  grep -q "^error: --attention cudnn: " <<<"$out" || { echo "FAILED: --attention cudnn"; echo "$out"; exit 1; }
  echo "--attention cudnn cannot run here: $(grep -m1 '^error:' <<<"$out")"
fi
for s in ddp zero1 zero2 zero3 hybrid; do
  mesh=(); [ "$s" = hybrid ] && mesh=(--mesh 2x1)
  for r in fp32 bf16; do
    run "bf16_${s}_reduce_$r" 2 --device cuda --strategy "$s" --reduce-dtype "$r" "${mesh[@]}"
    compare gpu_bf16 "bf16_${s}_reduce_$r" 0.02
  done
  run "nccl_$s" 1 --device cuda --comm nccl --strategy "$s"
  compare gpu_bf16 "nccl_$s" 0.02
  # NCCL on several ranks needs a GPU each: only the emulator has them
  # here; in both adversarial stream orders (every stream as late as the
  # host allows; collectives as early as their event waits allow).
  if [ -n "$emulated" ]; then
    for order in lazy eager-comm; do
      GPT_EMULATED_DEVICES=2 GPT_EMULATED_STREAMS=$order \
        run "nccl_${s}_np2_$order" 2 --device cuda --comm nccl --strategy "$s" "${mesh[@]}"
      compare gpu_bf16 "nccl_${s}_np2_$order" 0.02
    done
  fi
done
# --attention auto, the default on cuda (so the bf16 runs above ran cuDNN's attention where it can): cuDNN
# where both ranks can run it (then within 2% of our kernels), else our kernels (then the same run as with
# --attention ours, to the bit), with rank 0's log saying which and why.
run ours_zero3 2 --device cuda --strategy zero3 --attention ours
out="$("$mpirun" -np 2 "${train[@]}" --metrics "$work/auto_zero3.jsonl" --device cuda --strategy zero3 2>&1)" ||
  { echo "FAILED: --attention auto"; echo "$out"; exit 1; }
line="$(grep -m1 -o 'attention auto: .*' <<<"$out" || true)"  # rank 0's log line, after its prefix
if [[ "$line" == "attention auto: cudnn (every rank has cuDNN engines"* ]]; then
  [ -z "$emulated" ] || { echo "FAILED: --attention auto chose cuDNN on the emulator"; echo "$out"; exit 1; }
  compare ours_zero3 auto_zero3 0.02
elif [[ "$line" == "attention auto: ours (cuDNN's attention cannot run on rank 0: "* ]]; then
  compare ours_zero3 auto_zero3 0
else
  echo "FAILED: --attention auto: no line saying which attention runs"; echo "$out"; exit 1
fi
python3 - "$work/auto_zero3.jsonl" "$line" <<'PY'
import json, sys
header = json.loads(open(sys.argv[1]).readline())
chosen = header["config"]["attention"]
assert header.get("attention_auto") == sys.argv[2] and sys.argv[2].startswith(f"attention auto: {chosen} ("), \
    (header.get("attention_auto"), chosen)
print(sys.argv[2], "(recorded in the metrics header)")
PY
# --comm auto (the default): NCCL when every rank has a GPU of its own,
# else MPI staged through the host; the choice is in the metrics header.
if [ -n "$emulated" ]; then
  run auto_shared 2 --device cuda
  GPT_EMULATED_DEVICES=2 run auto_own 2 --device cuda
  python3 - "$work/auto_shared.jsonl" "$work/auto_own.jsonl" <<'PY'
import json, sys
for path, want in zip(sys.argv[1:], ("mpi", "nccl")):
    header = json.loads(open(path).readline())
    assert header["comm_backend"] == want and want in header["comm_auto"], (path, header["comm_backend"], header.get("comm_auto"))
print("comm auto: mpi for 2 ranks on 1 GPU, nccl for 2 ranks on 2 GPUs")
PY
  # NCCL asked for on 2 ranks sharing one GPU: one line naming the sharing.
  if out="$("$mpirun" -np 2 "${train[@]}" --device cuda --comm nccl 2>&1)"; then
    echo "FAILED: --comm nccl ran on 2 ranks sharing one GPU"; echo "$out"; exit 1
  fi
  grep -q "^error: 2 ranks on this node use the same GPU (emulated CUDA device, device 0 here): launch one rank" \
    <<<"$out" || { echo "FAILED: --comm nccl on a shared GPU: no error line"; echo "$out"; exit 1; }
fi
# No GPU, or a driver older than the CUDA runtime: one line that begins
# "no CUDA device" (what the skip above looks for) and says which, from
# every rank's run (the ranks stop together).
if [ -n "$emulated" ]; then
  cases=("GPT_EMULATED_DEVICES=0|(cudaErrorNoDevice: no CUDA-capable device is detected; check CUDA_VISIBLE_DEVICES)"
         "GPT_EMULATED_DRIVER_VERSION=12040|; the NVIDIA driver supports CUDA 12.4, older than this build's CUDA"
         "GPT_EMULATED_DRIVER_VERSION=0|(cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA"
         "GPT_EMULATED_DRIVER_VERSION=0|; no NVIDIA driver found here for this build's CUDA runtime ")
  for case in "${cases[@]}"; do
    if out="$(env "${case%%|*}" "$mpirun" -np 2 "${train[@]}" --device cuda 2>&1)"; then
      echo "FAILED: ${case%%|*}: the run did not stop"; echo "$out"; exit 1
    fi
    grep "^error: no CUDA device is visible on this node (" <<<"$out" | grep -qF "${case#*|}" ||
      { echo "FAILED: ${case%%|*}: no error line with: ${case#*|}"; echo "$out"; exit 1; }
  done
  # A GPU older than compute capability 8.0, or one this build has no code
  # for (built for other architectures): one line naming the GPU and what
  # to do, and both ranks end.
  gpu0="GPU 0 (emulated CUDA device, compute capability"
  no_code="error: this build has no CUDA code for $gpu0 9.0) (cudaErrorNoKernelImageForDevice): it was built"
  cases=("GPT_EMULATED_COMPUTE_CAPABILITY=7.5|error: $gpu0 7.5) is too old for --device cuda, which needs compute"
         "GPT_EMULATED_NO_KERNEL_IMAGE=1|$no_code for CUDA architectures ")
  for case in "${cases[@]}"; do
    if out="$(env "${case%%|*}" "$mpirun" -np 2 "${train[@]}" --device cuda 2>&1)"; then
      echo "FAILED: ${case%%|*}: the run did not stop"; echo "$out"; exit 1
    fi
    grep -F "${case#*|}" <<<"$out" | grep -q "^error: " ||
      { echo "FAILED: ${case%%|*}: no error line beginning: ${case#*|}"; echo "$out"; exit 1; }
  done
  grep -q "; rebuild with scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90$" <<<"$out" ||
    { echo "FAILED: no kernel image: the line does not say how to rebuild"; echo "$out"; exit 1; }
fi
# --strategy auto on cuda plans with the memory of the GPU each rank uses,
# shared by the ranks on it (the least of any rank), and MFU's peak is the
# GPU's, shared alike. Emulated GPUs that report 3 MiB and an H100's name:
# 2 ranks on one have 1.5 MiB each, where nothing fits (zero1, the
# smallest, needs 2.0 MiB), so the run ends with the planner's one line; on
# two of them they have 3 MiB each and run zero1 (what `plan` recommends
# for 3 MiB per rank) over NCCL, with an aggregate peak of two H100s, also
# when each rank sees one GPU of its own as its device 0 (srun
# --gpus-per-task=1: GPUs are told apart by UUID, not by index); --device-mem
# 3MiB on the shared one runs too, over MPI, against one H100's peak, and
# plans with host staging's bandwidth inside the node.
if [ -n "$emulated" ]; then
  h100=(env "GPT_EMULATED_DEVICE_NAME=NVIDIA H100 80GB HBM3" "GPT_EMULATED_DEVICE_MEMORY=$((3 << 20))")
  auto=(--device cuda --strategy auto)
  if out="$("${h100[@]}" "$mpirun" -np 2 "${train[@]}" "${auto[@]}" 2>&1)"; then
    echo "FAILED: --strategy auto planned 2 ranks sharing a 3 MiB GPU as if each had it"; echo "$out"; exit 1
  fi
  for want in "plan for 2 ranks, 2 per node, 1.5 MiB per rank (NVIDIA H100 80GB HBM3: 3.0 MiB shared by 2 ranks; " \
              "error: invalid strategy = 'auto': nothing fits: the smallest, zero1, needs 2.0 MiB per rank against"; do
    grep -qF "$want" <<<"$out" || { echo "FAILED: --strategy auto, sharing: no line with: $want"; echo "$out"; exit 1; }
  done
  "${h100[@]}" GPT_EMULATED_DEVICES=2 "$mpirun" -np 2 "${train[@]}" "${auto[@]}" --metrics "$work/auto_gpu_own.jsonl" \
    > "$work/auto_gpu_own.log" 2>&1 || { echo "FAILED: auto_gpu_own"; cat "$work/auto_gpu_own.log"; exit 1; }
  "${h100[@]}" GPT_EMULATED_GPU_PER_RANK=1 "$mpirun" -np 2 "${train[@]}" "${auto[@]}" \
    --metrics "$work/auto_gpu_per_rank.jsonl" > "$work/auto_gpu_per_rank.log" 2>&1 ||
    { echo "FAILED: auto_gpu_per_rank"; cat "$work/auto_gpu_per_rank.log"; exit 1; }
  "${h100[@]}" "$mpirun" -np 2 "${train[@]}" "${auto[@]}" --device-mem 3MiB --metrics "$work/auto_gpu_flag.jsonl" \
    > "$work/auto_gpu_flag.log" 2>&1 || { echo "FAILED: auto_gpu_flag"; cat "$work/auto_gpu_flag.log"; exit 1; }
  # Inside a node an H100's NVLink ring (360 GB/s), or, sharing one, the MPI
  # communicator's host staging (3 GB/s).
  grep -qF "3.0 MiB per rank (NVIDIA H100 80GB HBM3: 3.0 MiB; the least of any rank), 360 GB/s inside a node" \
    "$work/auto_gpu_own.log" &&
    grep -qF "3.0 MiB per rank (--device-mem), 3 GB/s inside a node" "$work/auto_gpu_flag.log" ||
    { echo "FAILED: --strategy auto: the memory per rank or the bandwidth"; cat "$work/auto_gpu_own.log" \
      "$work/auto_gpu_flag.log"; exit 1; }
  # Ranks sharing a GPU talk through the MPI communicator's host staging: its
  # bandwidth and its latency (ClusterSpec::kHostIntraBw, kHostBaseLat, kHostIntraLat).
  for bw in 360 3; do
    host=(); [ "$bw" = 3 ] && host=(--base-lat-us 4 --intra-lat-us 4)
    "$build/apps/plan" --config "$work/tiny.toml" --n-head 2 --ranks 2 --device cuda --device-mem 3MiB \
      --intra-gbps $bw "${host[@]}" --json "$work/auto_gpu_plan_$bw.json" > /dev/null
  done
  python3 - "$work/auto_gpu_plan_360.json" "$work/auto_gpu_plan_3.json" "$work/auto_gpu_own.jsonl" \
    "$work/auto_gpu_per_rank.jsonl" "$work/auto_gpu_flag.jsonl" <<'PY'
import json, sys
plans = [json.load(open(path))["recommended"] for path in sys.argv[1:3]]
for path, gpus, comm, best in zip(sys.argv[3:], (2, 2, 1), ("nccl", "nccl", "mpi"), (plans[0], plans[0], plans[1])):
    header = json.loads(open(path).readline())
    assert header["strategy"] == best, (path, header["strategy"], best)
    assert header["gemm_peak_flops"] == gpus * 989e12, (path, header["gemm_peak_flops"])
    assert header["comm_backend"] == comm, (path, header["comm_backend"], header.get("comm_auto"))
best = plans[0]
print(f"strategy auto on cuda: nothing fits 2 ranks sharing a 3 MiB GPU; {best} on two (as plan; also when each "
      "sees its own as device 0), MFU against one H100 per GPU")
PY
  # A MIG instance, here 66 of an H100's 132 multiprocessors: MFU against
  # that share of the GPU's peak (the planner's peak per rank is the same
  # number, gpu_peak_flops with the device's multiprocessors).
  "${h100[@]}" GPT_EMULATED_DEVICE_SMS=66 "$mpirun" -np 1 "${train[@]}" --device cuda --metrics "$work/mig.jsonl" \
    > "$work/mig.log" 2>&1 || { echo "FAILED: mig"; cat "$work/mig.log"; exit 1; }
  python3 - "$work/mig.jsonl" <<'PY'
import json, sys
header = json.loads(open(sys.argv[1]).readline())
assert header["gemm_peak_flops"] == 989e12 * 66 / 132, header["gemm_peak_flops"]
print("a MIG instance with half an H100's multiprocessors: MFU against half its peak")
PY
fi
# Hybrid 2x2 on NCCL: the shard groups' reduce-scatters and the replica
# groups' all-reduces on two communicators' streams (2 ranks have only one
# group of size 2), in both stream orders.
if [ -n "$emulated" ]; then
  for order in lazy eager-comm; do
    GPT_EMULATED_DEVICES=4 GPT_EMULATED_STREAMS=$order \
      run "nccl_hybrid_np4_$order" 4 --device cuda --comm nccl --strategy hybrid --mesh 2x2
    compare gpu_bf16 "nccl_hybrid_np4_$order" 0.02
  done
fi
# Samples through the device's key/value cache, 40 tokens on a context of
# 32 (past it the window slides: whole passes), at steps 4 and 8, drawn at
# temperature 1 from the seeded generator (a greedy sample of this barely
# trained model is all spaces, which would prove nothing): zero3 on 2 ranks,
# which gathers every block again for each token, equals 1 GPU rank
# exactly; the fp32 GPU's text equals the CPU's on the emulator (on a real
# GPU a draw that falls within ~1e-6 of a boundary between two tokens may
# go the other way, so there the texts must only be as long).
smp=(--sample-tokens 40 --sample-temperature 1 --sample-every 4)
run smp_cpu 1 --device cpu "${smp[@]}"
run smp_fp32 1 --device cuda --precision fp32 "${smp[@]}"
run smp_fp32_zero3_np2 2 --device cuda --precision fp32 --strategy zero3 "${smp[@]}"
python3 - "$work" "${emulated:+exact}" <<'PY'
import re, sys
work, exact = sys.argv[1], sys.argv[2] == "exact"
def samples(name):  # each sample's text: from its heading to the next log line
    log = open(f"{work}/{name}.log", "rb").read().decode("latin-1")  # byte tokens: any byte
    found = re.findall(r"sample at step (\d+):\n(.*?)(?=\n\[\d\d:\d\d:\d\d|\Z)", log, re.S)
    assert [s for s, _ in found] == ["4", "8"], f"{name}: samples at steps {[s for s, _ in found]}"
    return [t for _, t in found]
cpu, gpu, zero3 = samples("smp_cpu"), samples("smp_fp32"), samples("smp_fp32_zero3_np2")
assert zero3 == gpu, f"zero3 on 2 ranks sampled {zero3!r}, 1 GPU rank {gpu!r}"
if exact:
    assert gpu == cpu, f"the GPU sampled {gpu!r}, the CPU {cpu!r}"
else:
    assert [len(t) for t in gpu] == [len(t) for t in cpu], (gpu, cpu)
assert len(set(cpu[1])) > 3, f"a sample that proves little: {cpu[1]!r}"
print(f"samples: GPU (cached) {'equal to' if gpu == cpu else 'differ from'} the CPU's; zero3 on 2 ranks equal: {gpu[1]!r}")
PY
# HellaSwag: forward passes of 4 endings padded to the longest, per-position
# losses downloaded; with zero3 one rank makes an empty pass at the end.
python3 -c 'import random, sys; r = random.Random(3); open(sys.argv[1], "w").write("".join(r.choice("abcdefgh  ") for _ in range(20000)))' "$work/noise.txt"
python3 "$here/../make_hellaswag.py" "$work/noise.txt" "$work/hellaswag.jsonl" 33 40
hs=(--hellaswag "$work/hellaswag.jsonl" --micro-batch 4)
compare_hellaswag() {  # REF RUN TOLERANCE: the last evaluation's accuracies
  python3 - "$work/$1.jsonl" "$work/$2.jsonl" "$3" <<'PY'
import json, sys
a, b = ([r for r in map(json.loads, open(p)) if "hellaswag" in r][-1]["hellaswag"] for p in sys.argv[1:3])
tol = float(sys.argv[3])
print(f"{sys.argv[2].split('/')[-1]:<30} hellaswag acc_norm {b['acc_norm']:.4f} acc {b['acc']:.4f}, "
      f"CPU {a['acc_norm']:.4f} {a['acc']:.4f} (tolerance {tol:g})")
assert a["examples"] == b["examples"] == 33
sys.exit(0 if all(abs(a[k] - b[k]) <= tol for k in ("acc", "acc_norm")) else 1)
PY
}
hs_tol=0.061; [ -n "$emulated" ] && hs_tol=0  # 2 of 33 examples on a real GPU
train_8_steps=("${train[@]}")
train=("$trainer" --config "$work/tiny.toml" --n-head 2 --steps 2)  # 2 steps: the scores still near-random
run hs_cpu 1 --device cpu "${hs[@]}"
run hs_fp32 1 --device cuda --precision fp32 "${hs[@]}"
compare_hellaswag hs_cpu hs_fp32 "$hs_tol"
run hs_fp32_zero3_np2 2 --device cuda --precision fp32 --strategy zero3 "${hs[@]}"
compare_hellaswag hs_cpu hs_fp32_zero3_np2 "$hs_tol"
run hs_bf16_zero3_np2 2 --device cuda --strategy zero3 "${hs[@]}"
compare_hellaswag hs_cpu hs_bf16_zero3_np2 0.25
train=("${train_8_steps[@]}")
# Checkpoints of device state (bf16 parameters, fp32 master and moments
# downloaded; uploaded and narrowed on resume): zero3 on 2 ranks saves at
# step 4; resumed by zero3 on 2 ranks it continues exactly, by ddp on 1 rank
# within the strategies' 2%.
# (Our attention kernels: cuDNN's accumulates dQ with atomics, so a rerun may differ in the last bits.)
run ckpt_zero3 2 --device cuda --strategy zero3 --attention ours --ckpt-dir "$work/ckpt" --ckpt-every 4
run resume_zero3 2 --device cuda --strategy zero3 --attention ours --resume "$work/ckpt/step_00000004"
compare ckpt_zero3 resume_zero3 0
run resume_ddp_np1 1 --device cuda --strategy ddp --resume "$work/ckpt/step_00000004"
compare ckpt_zero3 resume_ddp_np1 0.02
# ddp on 2 ranks with --ckpt-async: each rank downloads the share it writes
# (half the state), which is the background write's snapshot; the
# checkpoint equals the synchronous run's bit for bit and resumes exactly.
# The synchronous run starts with --resume auto in its empty --ckpt-dir (the
# host copies made for a load that finds nothing are dropped, the state
# untouched: the two runs must still agree to the bit).
run ckpt_ddp 2 --device cuda --strategy ddp --attention ours --ckpt-dir "$work/ckpt_ddp" --ckpt-every 4 --resume auto
grep -q "resume auto: no checkpoint in $work/ckpt_ddp yet, starting fresh" "$work/ckpt_ddp.log" ||
  { echo "FAILED: ckpt_ddp did not start fresh under --resume auto"; cat "$work/ckpt_ddp.log"; exit 1; }
run ckpt_ddp_async 2 --device cuda --strategy ddp --attention ours --ckpt-dir "$work/ckpt_ddp_async" --ckpt-every 4 \
  --ckpt-async
compare ckpt_ddp ckpt_ddp_async 0
"$build/apps/ckpt_tool" compare "$work/ckpt_ddp/step_00000004" "$work/ckpt_ddp_async/step_00000004" |
  grep -q "^identical: " || { echo "FAILED: ddp's async checkpoint is not its synchronous one"; exit 1; }
python3 - "$work/ckpt_ddp_async.jsonl" <<'PY' || { echo "FAILED: ddp's async snapshot is not its share"; exit 1; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
psi, ck = recs[0]["params_stored"], [r for r in recs if r.get("type") == "checkpoint"]
assert [r["step"] for r in ck] == [4, 8] and all(6 * psi <= r["snapshot_bytes"] <= 6 * psi + 12 * 64 for r in ck), ck
print(f"ddp --ckpt-async on the device, 2 ranks: a {ck[0]['snapshot_bytes']}-byte snapshot of {12 * psi} bytes")
PY
run resume_ddp_async 2 --device cuda --strategy ddp --attention ours --resume "$work/ckpt_ddp_async/step_00000004"
compare ckpt_ddp resume_ddp_async 0
# Evaluation only (--steps 0) keeps the bf16 parameters alone, loaded from
# the checkpoint's fp32 master weights straight into them: the validation
# loss of zero3's step 4 (on 2 ranks, as it trained) from ddp and zero3
# evaluating that checkpoint, to the bit, in 2 bytes a parameter (zero3: 1
# per rank) where training keeps 9 to 16; zero3's through transfers in
# pieces of 1000 elements.
"$build/apps/prepare_data" --input "$work/text.txt" --out "$work/val" --name v --val-fraction 0.2 >/dev/null
val=(--val-data "$work/val/v_val_*.bin" --val-batches 2)
train=("$trainer" --config "$work/tiny.toml" --n-head 2)  # head size 32, the steps below
run eval_trained 2 --device cuda --strategy zero3 --attention ours --steps 4 "${val[@]}" --ckpt-dir "$work/ckpt_eval"
for s in ddp zero3; do
  # zero3's parameters cross between host fp32 and device bf16 in pieces of 1000 elements (64 MiB outside tests):
  # several per unit, which must land where they belong for the loss to be step 4's.
  chunk=$([[ $s == zero3 ]] && echo 1000 || echo 0)
  GPT_TEST_TRANSFER_CHUNK=$chunk run "eval_only_$s" 2 --device cuda --strategy "$s" --attention ours --steps 0 \
    "${val[@]}" --resume "$work/ckpt_eval/step_00000004"
  python3 - "$work/eval_trained.jsonl" "$work/eval_only_$s.jsonl" <<'PY' || { echo "FAILED: eval_only_$s"; exit 1; }
import json, sys
trained, evaluated = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
step4 = [r for r in trained if r.get("step") == 4 and "type" not in r][0]
ev = [r for r in evaluated if r.get("type") == "eval"][0]
state = lambda rs: [r for r in rs if r.get("type") == "run"][0]["model_state_bytes"]
print(f"{sys.argv[2].split('/')[-1]:<30} val loss {ev['val_loss']!r} (step 4's {step4['val_loss']!r}); "
      f"model state {state(evaluated)} B (training's {state(trained)} B)")
assert ev["step"] == 4 and ev["val_loss"] == step4["val_loss"], (ev, step4)
# 2 bytes per parameter (zero3: half of them per rank, each unit padded to an even count), nothing else.
header = [r for r in evaluated if r.get("type") == "run"][0]
per_rank = 2 * header["params_stored"] / (2 if header["strategy"] == "zero3" else 1)
assert abs(state(evaluated) - per_rank) <= 16, (state(evaluated), per_rank)
PY
done
# The same evaluation with --attention auto (the default): where cuDNN runs, its forward plan alone is built and
# the line says so (a forward-only model never runs the backward's graph), the loss within 2% of our kernels'
# (bf16 rounding, different kernels); elsewhere our kernels, to the bit.
run eval_auto 2 --device cuda --strategy ddp --steps 0 "${val[@]}" --resume "$work/ckpt_eval/step_00000004"
line="$(grep -m1 -o 'attention auto: .*' "$work/eval_auto.log" || true)"
if [[ "$line" == "attention auto: cudnn (every rank has cuDNN engines for the forward (--steps 0: evaluation only) at B="* ]]; then
  [ -z "$emulated" ] || { echo "FAILED: eval_auto chose cuDNN on the emulator"; exit 1; }
  tol=0.02
elif [[ "$line" == "attention auto: ours (cuDNN's attention cannot run on rank 0: "* ]]; then
  tol=0
else
  echo "FAILED: eval_auto: no line saying which attention runs"; cat "$work/eval_auto.log"; exit 1
fi
python3 - "$work/eval_only_ddp.jsonl" "$work/eval_auto.jsonl" "$tol" <<'PY' || { echo "FAILED: eval_auto"; exit 1; }
import json, sys
a, b = ([r["val_loss"] for r in map(json.loads, open(p)) if r.get("type") == "eval"][0] for p in sys.argv[1:3])
print(f"evaluation, --attention auto: val loss {b!r}; ours: {a!r} (tolerance {sys.argv[3]})")
assert abs(a - b) <= float(sys.argv[3]) * abs(a), (a, b)
PY
# --val-batches 0 on the GPU: 93 sequences, 23 whole batches on 2 ranks and the last on rank 0 alone (rank 1 runs
# the blocks for zero3's gathers), the mean over all of them: what 1 rank reading them one at a time gives (fp32).
head -c 3000 "$work/text.txt" >"$work/val93.txt"
"$build/apps/prepare_data" --input "$work/val93.txt" --out "$work/val93" --name v --val-fraction 0 >/dev/null
all93=(--device cuda --precision fp32 --attention ours --steps 0 --val-data "$work/val93/v_train_*.bin")
run eval_all_zero3 2 "${all93[@]}" --strategy zero3 --val-batches 0 --resume "$work/ckpt_eval/step_00000004"
run eval_one_by_one 1 "${all93[@]}" --micro-batch 1 --val-batches 93 --resume "$work/ckpt_eval/step_00000004"
python3 - "$work/eval_all_zero3.jsonl" "$work/eval_one_by_one.jsonl" <<'PY' || { echo "FAILED: eval_all_zero3"; exit 1; }
import json, sys
a, b = ([r["val_loss"] for r in map(json.loads, open(p)) if r.get("type") == "eval"][0] for p in sys.argv[1:])
print(f"--val-batches 0 on 2 ranks (zero3): {a!r}; one sequence at a time on 1 rank: {b!r}")
assert abs(a - b) <= 1e-6 * abs(b), (a, b)
PY
grep -q 'validation: all 93 sequences (--val-batches 0): 23 batches of 2 x 2 ranks and the last 1' \
  "$work/eval_all_zero3.log" || { cat "$work/eval_all_zero3.log"; echo "FAILED: eval_all_zero3's log"; exit 1; }
echo "every strategy on the ${emulated:+emulated }GPU: ok"
