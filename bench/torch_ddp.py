#!/usr/bin/python3
"""PyTorch DistributedDataParallel on the CPU (gloo), the same training step
as gpt_train --strategy ddp: per rank, micro-batches accumulated under
no_sync() but the last (whose backward all-reduces the gradients in
buckets, overlapping it), global-norm clipping, AdamW. Random tokens (the
throughput does not depend on them). One JSON line from rank 0.

  bench/torch_ddp.py --ranks N [--threads 1] [--steps 10] [--warmup 2]
      [--n-layer 6 --n-head 6 --n-embd 384 --seq-len 256 --vocab-size 256]
      [--global-batch 16 --micro-batch 4]
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from torch_gpt import GPT, init_and_adamw  # noqa: E402


def worker(rank, args, init_file):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=args.ranks)
    torch.manual_seed(0)  # the same initial model on every rank (DDP also broadcasts rank 0's)
    c = dict(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, n_ctx=args.seq_len,
             vocab_size=args.vocab_size)
    model = GPT(c)
    opt = init_and_adamw(model, lr=1e-3)
    ddp = DDP(model)  # broadcasts rank 0's parameters (the same here: the same seed)
    micro = args.global_batch // (args.ranks * args.micro_batch)
    assert micro * args.ranks * args.micro_batch == args.global_batch, "global batch not divisible"
    B, T, V = args.micro_batch, args.seq_len, args.vocab_size
    g = torch.Generator().manual_seed(rank)
    times = []
    for s in range(args.warmup + args.steps):
        xs = [torch.randint(0, V, (B, T), generator=g) for _ in range(micro)]
        ys = [torch.randint(0, V, (B, T), generator=g) for _ in range(micro)]
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for m in range(micro):
            last = m == micro - 1
            ctx = ddp.no_sync() if not last else torch.enable_grad()
            with ctx:
                loss = F.cross_entropy(ddp(xs[m]).view(-1, V), ys[m].view(-1)) / micro
                loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if s >= args.warmup:
            times.append(dt)
    slowest = torch.tensor([sum(times) / len(times)])
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # the step ends when the slowest rank's does
    if rank == 0:
        mean = float(slowest)
        print(json.dumps({"impl": "pytorch-ddp-gloo", "torch_version": torch.__version__, "ranks": args.ranks,
                          "threads": args.threads, "steps": args.steps, "step_time_s": mean,
                          "tokens_per_s": args.global_batch * T / mean}), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--n-layer", type=int, default=6)
    ap.add_argument("--n-head", type=int, default=6)
    ap.add_argument("--n-embd", type=int, default=384)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--vocab-size", type=int, default=256)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(args, os.path.join(d, "init")), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
