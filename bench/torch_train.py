#!/usr/bin/python3
"""The same training step as bench/train_throughput in PyTorch on the CPU
(Debian's python3-torch): forward, cross-entropy, backward, global-norm
clipping, AdamW. Same configurations, same thread count; prints JSON lines.

  bench/torch_train.py [--threads N] [--steps N] [--warmup N] [--configs a,b,c]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from torch_gpt import GPT, init_and_adamw  # noqa: E402

CONFIGS = {
    "a": dict(n_layer=4, n_head=4, n_embd=256, n_ctx=256, vocab_size=256, B=8, T=256),
    "b": dict(n_layer=12, n_head=12, n_embd=768, n_ctx=256, vocab_size=50257, B=4, T=256),
    "c": dict(n_layer=12, n_head=12, n_embd=768, n_ctx=1024, vocab_size=50257, B=1, T=1024),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--configs", default="a,b,c")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for name in args.configs.split(","):
        c = CONFIGS[name]
        model = GPT(c)
        opt = init_and_adamw(model, lr=1e-4)
        B, T, V = c["B"], c["T"], c["vocab_size"]
        x = torch.randint(0, V, (B, T))
        y = torch.randint(0, V, (B, T))
        times = []
        for s in range(args.warmup + args.steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            dt = time.perf_counter() - t0
            if s >= args.warmup:
                times.append(dt)
        mean = sum(times) / len(times)
        print(json.dumps({"config": name, "impl": "pytorch", "torch_version": torch.__version__,
                          "threads": torch.get_num_threads(), "steps": args.steps, "step_time_s": mean,
                          "best_step_time_s": min(times), "tokens_per_s": B * T / mean, "loss": loss.item()}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
