#!/usr/bin/env python3
"""PyTorch's fused causal attention at the shape bench_gpu_attention times:
F.scaled_dot_product_attention in bf16 with each fused backend PyTorch has
here (FlashAttention-2, cuDNN), forward and backward timed with CUDA events
after warm-up, FLOPs in the FlashAttention convention (forward 2*B*T^2*C,
backward 2.5x). q, k, v are contiguous [B, NH, T, HS] tensors: the kernels
alone, without the layout copies a model around them would add. Prints a
table and one JSON line.

  bench/torch_gpu_attention.py [--model gpt2-124m] [--head-size N] [--batch 16] [--seq 1024] [--iters 20]

--head-size splits the model's width into heads of N instead of its own (as
bench_gpu_attention's --head-size).
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {"gpt2-124m": (12, 768), "gpt2-350m": (16, 1024), "gpt2-774m": (20, 1280)}  # n_head, n_embd


def time_backend(backend, q, k, v, dy, iters):
    e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    fwd = bwd = 0.0
    with sdpa_kernel(backend):
        for it in range(iters + 3):  # 3 untimed warm-up iterations
            q.grad = k.grad = v.grad = None
            e0.record()
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            e1.record()
            out.backward(dy)
            e2.record()
            e2.synchronize()
            if it >= 3:
                fwd += e0.elapsed_time(e1)
                bwd += e1.elapsed_time(e2)
    return fwd / iters, bwd / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--head-size", type=int, default=0, help="heads of this size (0: the model's)")
    a = ap.parse_args()
    nh, C = SHAPES[a.model]
    if a.head_size:
        if a.head_size < 0 or C % a.head_size:
            ap.error(f"--head-size {a.head_size} does not divide {a.model}'s width {C}")
        nh = C // a.head_size
    torch.manual_seed(11)
    shape = (a.batch, nh, a.seq, C // nh)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    fwd_flops = 2.0 * a.batch * a.seq * a.seq * C
    rows = []
    print(f"# {'kernel':<18} {'fwd ms':>10} {'bwd ms':>10} {'fwd TF/s':>10} {'bwd TF/s':>10}")
    for name, backend in (("torch-flash2", SDPBackend.FLASH_ATTENTION), ("torch-cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            f, b = time_backend(backend, q, k, v, dy, a.iters)
        except RuntimeError as e:  # backend not available for this device/build
            print(f"  {name:<18} unavailable: {str(e).splitlines()[0][:80]}")
            continue
        ftf, btf = fwd_flops / (f * 1e-3) / 1e12, 2.5 * fwd_flops / (b * 1e-3) / 1e12
        print(f"  {name:<18} {f:>10.3f} {b:>10.3f} {ftf:>10.1f} {btf:>10.1f}")
        rows.append({"kernel": name, "fwd_ms": f, "bwd_ms": b, "fwd_tflops": ftf, "bwd_tflops": btf})
    print(json.dumps({"bench": "attention", "impl": "pytorch", "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0), "model": a.model, "batch": a.batch, "seq": a.seq,
                      "heads": nh, "head_size": C // nh, "iters": a.iters, "rows": rows}))


if __name__ == "__main__":
    main()
