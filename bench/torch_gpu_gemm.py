#!/usr/bin/env python3
"""PyTorch's plain GEMM at every shape bench_gpu_gemm timed: reads that
program's JSON line (--shapes FILE) and, for each distinct (op, pass), times
on the GPU in bf16 (or fp32 without TF32, as ours):
  fwd   F.linear(x[N, C], W[OC, C], bias)   (bias only where ours has one)
  dinp  dout[N, OC] @ W[OC, C]
  dW    dout^T[OC, N] @ x[N, C]
with CUDA events after warm-up, FLOPs 2*N*C*OC. PyTorch reaches cuBLAS(Lt)
with its own heuristics and no epilogue beyond the bias, so the ratio per
row says whether our algorithm choice and fused epilogues cost or gain.
And for each bias gradient bench_gpu_gemm timed (its "bias_grad" rows):
dout[N, OC].sum(0), as autograd computes a linear layer's bias gradient,
with GB/s of dout read. Prints tables and one JSON line.

  bench/torch_gpu_gemm.py --shapes GEMM_JSON [--iters 20]
"""
import argparse
import json

import torch
import torch.nn.functional as F


def time_ms(fn, iters):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True, help="bench_gpu_gemm's JSON line")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    ours = json.loads(open(a.shapes).read())
    dtype = torch.bfloat16 if ours["precision"] == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(3)
    rows, seen = [], set()
    print(f"# {'op':<8} {'pass':<5} {'m':>7} {'n':>6} {'k':>6} {'ms':>9} {'TFLOP/s':>9}")
    for r in ours["results"]:
        key = (r["op"], r["pass"])
        if key in seen:  # the GELU variants share one plain GEMM
            continue
        seen.add(key)
        N, C, OC = r["N"], r["C"], r["OC"]
        rand = lambda *s: torch.rand(*s, device="cuda", dtype=dtype) * 2 - 1
        w = rand(OC, C)
        if r["pass"] == "fwd":
            x, b = rand(N, C), rand(OC) if r["bias"] else None
            fn = lambda: F.linear(x, w, b)
        elif r["pass"] == "dinp":
            dout = rand(N, OC)
            fn = lambda: dout @ w
        else:
            dout, x = rand(N, OC), rand(N, C)
            fn = lambda: dout.t() @ x
        ms = time_ms(fn, a.iters)
        tflops = 2.0 * N * C * OC / (ms * 1e-3) / 1e12
        print(f"  {r['op']:<8} {r['pass']:<5} {r['m']:>7} {r['n']:>6} {r['k']:>6} {ms:>9.3f} {tflops:>9.1f}")
        rows.append({"op": r["op"], "pass": r["pass"], "m": r["m"], "n": r["n"], "k": r["k"], "ms": ms,
                     "tflops": tflops})
        del w, fn
    bias_rows = []
    print(f"# bias gradients: dout.sum(0)\n# {'op':<8} {'N':>7} {'OC':>6} {'ms':>9} {'GB/s':>9}")
    for op in dict.fromkeys(r["op"] for r in ours.get("bias_grad", [])):
        r = next(b for b in ours["bias_grad"] if b["op"] == op)
        dout = torch.rand(r["N"], r["OC"], device="cuda", dtype=dtype)
        ms = time_ms(lambda: dout.sum(0), a.iters)
        gbps = r["N"] * r["OC"] * dout.element_size() / (ms * 1e-3) / 1e9
        print(f"  {op:<8} {r['N']:>7} {r['OC']:>6} {ms:>9.3f} {gbps:>9.1f}")
        bias_rows.append({"op": op, "N": r["N"], "OC": r["OC"], "ms": ms, "gbps": gbps})
        del dout
    print(json.dumps({"bench": "gemm", "impl": "pytorch", "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0), "precision": ours["precision"], "iters": a.iters,
                      "results": rows, "bias_grad": bias_rows}))


if __name__ == "__main__":
    main()
