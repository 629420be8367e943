#!/usr/bin/env python3
"""The same training step as bench/bench_gpu_train in PyTorch on the GPU: a
nanoGPT-style GPT-2 (pre-LayerNorm, tanh GELU, tied head) with
F.scaled_dot_product_attention (flash kernels), bf16 autocast, fp32 master
weights, global-norm clipping and fused AdamW; eager or torch.compile.
Random tokens, CUDA-event timing after warm-up. Prints one JSON line.

  bench/torch_gpu_train.py [--mode eager|compile] [--model gpt2-124m] [--batch 16] [--seq 1024]
"""
import argparse
import json
import re
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {  # n_layer, n_head, n_embd (vocab 50257, context 1024)
    "gpt2-124m": (12, 12, 768),
    "gpt2-350m": (24, 16, 1024),
    "gpt2-774m": (36, 20, 1280),
}


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, nh, C, V=50304, ctx=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(ctx, C)
        self.h = nn.ModuleList(Block(C, nh) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = "cuda"
    L, nh, C = SHAPES[a.model]
    model = GPT(L, nh, C).to(dev)  # padded vocabulary 50304, as ours
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if a.mode == "compile" else model
    x = torch.randint(0, 50257, (a.batch, a.seq), device=dev)
    y = torch.randint(0, 50257, (a.batch, a.seq), device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            torch.cuda.synchronize()
            start.record()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = loss.item()  # a host wait per step, as in nanoGPT's loop; ours waits for the norm and loss
    end.record()
    torch.cuda.synchronize()
    step_s = start.elapsed_time(end) / 1e3 / a.steps
    mem_peak = torch.cuda.max_memory_allocated()
    print(json.dumps({"impl": f"pytorch-{a.mode}", "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0), "model": a.model, "batch": a.batch, "seq": a.seq,
                      "steps": a.steps, "tokens_per_s": a.batch * a.seq / step_s, "step_ms": step_s * 1e3,
                      "final_loss": loss_value, "mem_peak_bytes": mem_peak,
                      "attention_kernels": attention_kernels(step_model, opt, x, y)}))


def attention_kernels(step_model, opt, x, y):
    """The GPU kernels of one more (untimed) step whose names say attention:
    which SDPA backend this PyTorch picked (FlashAttention-2, cuDNN, memory-
    efficient), so our attention is compared with the one that ran. None if
    the profiler fails."""
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = step_model(x, y)
            loss.backward()
            torch.cuda.synchronize()
        pattern = re.compile(r"flash|fmha|sdpa|attn|attention", re.IGNORECASE)
        return sorted({e.key[:120] for e in prof.key_averages() if pattern.search(e.key)})
    except Exception as e:  # the row matters more than this detail
        print(f"attention kernels not recorded: {e}", file=sys.stderr)
        return None


if __name__ == "__main__":
    main()
